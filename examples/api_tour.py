"""planc from Python: build a model, plan it for two devices, check and simulate the plans.

Run from the checkout: `python3 examples/api_tour.py [OUTPUT_DIR]`.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import compiler as planc
from frontends.model_builder import ModelBuilder


def main(out: Path) -> None:
    m = ModelBuilder()
    x, w = m.tensor([1, 128, 512]), m.tensor([2048, 512])
    m.gelu(m.matmul(x, w, transpose_other=True))
    model = m.finish()

    print("model:", planc.check(model).summary)
    for arch in ("a100", "h100"):
        path = out / f"mlp.{arch}.plan.json"
        planc.compile(model, "ark", arch=arch, output=path)
        verdict = planc.check(path, strict=True)
        result = planc.simulate(path)
        print(f"{arch}: check {'ok' if verdict.ok else 'FAILED'}, simulation "
              f"{'ok' if result.ok else 'FAILED'}, modeled {result['modeled_time_s'] * 1e6:.1f} us,"
              f" max error {result['max_abs_error']:.3g}")
    files = planc.compile(model, "cpu")
    print("cpu program:", ", ".join(sorted(files)))


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(Path(sys.argv[1]))
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
