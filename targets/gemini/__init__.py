"""Gemini's machine model: layers and hardware (`model`), the facts of a schedule (`plan`), L2
planning (`l2`), the layer-graph interpreter (`dnn_interpreter`), the schedule simulator
(`simulator`) and the equivalence of a layer graph with its ARK model (`equivalence`)."""
