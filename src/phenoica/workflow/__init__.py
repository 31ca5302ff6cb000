"""Above every stage, what the Snakemake rules need before any job: the door (:mod:`.validate`,
the whole screen checked first), the screen's plates and the files found on disk (:mod:`.dag`),
the content digests of the user's inputs (:mod:`.digests`), each rule's params (:mod:`.params`),
input lists (:mod:`.rule_inputs`) and resources (:mod:`.rule_resources`), and the table of output
paths (:mod:`.paths`)."""
