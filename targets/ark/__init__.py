"""ARK's machine model: what an ARK model computes (`model_interpreter`, `model_outputs`), the
bytes its tensors touch (`byte_regions`, `tensor_layouts`), the cost of a plan on a GPU
(`cost_model`), and what a plan computes and whether it is legal (`plan_simulator`,
`plan_check` with the progressions and intervals of `coverage`)."""
