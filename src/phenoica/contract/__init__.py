"""The contract every stage builds on: the screen's column names and checks (:mod:`.screen`), the
values several stages share (:mod:`.errors`, :mod:`.score_table`), the boundary checks of feature
matrices (:mod:`.arrays`), and the configuration, its schema and the stages' typed options
(:mod:`.config`, :mod:`.schema`, :mod:`.stage_options`). It imports no stage."""
