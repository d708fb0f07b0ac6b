"""What several repair strategies share (no torch import): the site of each rule's finding (``sites``),
conditions lowered to bool tensors (``lower``), ``if`` chains (``branches``), reporting calls (``reporting``),
compile boundaries (``boundaries``), validations as in-graph checks (``validation``), scoped capture
(``capture``), counts read as numbers (``counts``), grouped-experts statement shapes (``experts``), LayerDrop's test (``layerdrop``)."""
