"""The component sweep: the screen scored again at other counts of whitened components, above the
stages it reruns (variants, classify, hits, the mAP readout and the batch classifier)."""
