"""Knowledge-graph embeddings: ComplEx with N3 and reciprocal relations.

* :mod:`~quillian.components.kge.config`: :class:`ComplExConfig`, the settings;
* :mod:`~quillian.components.kge.triples`: :class:`TripleSet`, int arrays plus counts
  and the graph's fingerprint;
* :mod:`~quillian.components.kge.sources`: triples from an imported graph or an index's
  document graph;
* :mod:`~quillian.components.kge.scoring`: :class:`ComplEx`, numpy scoring
  (``score_spo``, ``score_sp``, ``score_po`` and their batched forms);
* :mod:`~quillian.components.kge.train`: training in torch (1-vs-all or shared
  negatives), early stopping, checkpoints and resumption;
* :mod:`~quillian.components.kge.evaluate`: filtered MRR and Hits@k, both directions;
* :mod:`~quillian.components.kge.storage`: the model directory beside its graph.

Only :mod:`~quillian.components.kge.train` imports torch; scoring a saved model needs
numpy alone.
"""
