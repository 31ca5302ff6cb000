"""The contract every stage builds on: the screen's column names and checks (:mod:`.screen`), the
values several stages share (:mod:`.errors`, :mod:`.score_status`, :mod:`.score_columns`), the
boundary checks of feature matrices (:mod:`.arrays`) and the configuration, its schema and the
one resolution of its defaults (:mod:`.config`, :mod:`.schema`). It imports no stage."""
