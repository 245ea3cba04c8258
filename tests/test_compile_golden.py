"""Compile-speed work must not change what planc writes: the shipped examples (and a
generated stack of MLP blocks) compiled for ark on every GPU and for tt give the very bytes
recorded before the speed-ups (SHA-256 digests in `golden/compile_outputs.json`; the FFN's
A100 plan is kept whole in `golden/ffn.a100.plan.json`, so a difference can be read).

A change that is meant to change plans regenerates the record, and the diff of the readable
plan shows what changed:

    python -m tests.test_compile_golden
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from compiler.driver import main as planc_main
from tests.conftest import EXAMPLES, ROOT

GOLDEN = Path(__file__).parent / "golden"
DIGESTS = GOLDEN / "compile_outputs.json"
READABLE = {"ffn.json ark a100": GOLDEN / "ffn.a100.plan.json"}

CASES = {
    f"{example} {target} {arch}": (EXAMPLES / example, ["-t", target, "--arch", arch])
    for example in ("ffn.json", "attention.json", "attention_nodes.json")
    for target, archs in (("ark", ("a100", "h100", "mi300x")), ("tt", ("wormhole_b0",)))
    for arch in archs
}
CASES["ffn.json ark a100 indented"] = (EXAMPLES / "ffn.json",
                                       ["-t", "ark", "--json-layout", "indented"])


def generated_model(folder: Path) -> Path:
    from backends.ark_model import emit_model
    from frontends.model_zoo import generated

    path = folder / "generated200.json"
    path.write_text(emit_model(generated(200)))
    return path


def compile_case(name: str, folder: Path) -> bytes:
    if name == "generated200 ark a100":
        model, args = generated_model(folder), ["-t", "ark", "--arch", "a100"]
    else:
        model, args = CASES[name]
    out = folder / f"{name.replace(' ', '_')}.out"
    code = planc_main([str(model), *args, "-o", str(out)])
    assert code == 0, name
    return out.read_bytes()


ALL_CASES = [*CASES, "generated200 ark a100"]


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("name", ALL_CASES)
def test_output_is_byte_identical_to_the_record(name, tmp_path):
    recorded = json.loads(DIGESTS.read_text())
    data = compile_case(name, tmp_path)
    if name in READABLE:
        assert data.decode() == READABLE[name].read_text()
    assert digest(data) == recorded[name], (
        f"{name}: the output changed; if that is intended, regenerate the record with "
        "`python -m tests.test_compile_golden`")


def test_planc_as_a_program_writes_what_the_function_writes(tmp_path):
    # As a program, planc ends without freeing its IR (os._exit): its output must be flushed
    # first, to a file and to a pipe alike.
    model, args = CASES["ffn.json ark a100"]
    expected = compile_case("ffn.json ark a100", tmp_path)
    plan = tmp_path / "program.json"
    command = [sys.executable, "-m", "compiler.driver", str(model), *args]
    subprocess.run([*command, "-o", str(plan)], check=True, cwd=ROOT)
    piped = subprocess.run(command, check=True, capture_output=True, cwd=ROOT).stdout
    assert plan.read_bytes() == expected
    assert piped == expected


def regenerate() -> None:
    import tempfile

    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        record = {}
        for name in ALL_CASES:
            data = compile_case(name, Path(tmp))
            record[name] = digest(data)
            if name in READABLE:
                READABLE[name].write_bytes(data)
    DIGESTS.write_text(json.dumps(record, indent=2) + "\n")
    print(f"wrote {DIGESTS} ({len(record)} outputs)")


if __name__ == "__main__":
    regenerate()
