"""Where a screen comes from: the simulated demo screen (:mod:`.demo`)."""
