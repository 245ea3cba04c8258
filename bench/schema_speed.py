"""What checking a document against its JSON Schema adds to reading it.

    python bench/schema_speed.py [--ops 10000] [--repeat 3] [--reference] [FILE...]

For a generated ARK model of `--ops` operators (`frontends.model_zoo.generated`, written to a
temporary file) and for each FILE (default: the largest file of ../shared/corpus), prints the
seconds of: parsing the JSON, the schema check (fastjsonschema, compiled once beforehand; the
compile time is printed separately), the importer, and the check's share of parse + schema +
import. The best of `--repeat` runs of each stage is taken. `--reference` also times the
interpreting validator of `jsonschema` (once) on the same document.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compiler.pipeline import without_garbage_collection  # noqa: E402
from frontends import detect_format, schemas  # noqa: E402
from ground.json_reader import load_json_file  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"


def best(repeat: int, work) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def measure(path: Path, repeat: int, reference: bool = False) -> None:
    parse, doc = best(repeat, lambda: load_json_file(path))
    fmt = detect_format(doc.value)
    start = time.perf_counter()
    schemas.compiled(fmt.schema)
    compile_time = time.perf_counter() - start
    check, _ = best(repeat, lambda: schemas.validate(fmt.schema, doc.value))
    with without_garbage_collection():
        imported, _ = best(repeat, lambda: fmt.import_document(doc))
    share = check / (parse + check + imported)
    if reference:
        start = time.perf_counter()
        assert schemas.first_error(fmt.schema, doc.value) is None
        print(f"  jsonschema: {time.perf_counter() - start:.3f} s")
    print(f"{path.name} ({path.stat().st_size / 1e6:.1f} MB, {fmt.name}): parse {parse:.3f} s, "
          f"schema {check:.3f} s (compiled once in {compile_time:.3f} s), import "
          f"{imported:.3f} s; the schema is {100 * share:.1f}% of reading")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--ops", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--reference", action="store_true", help="time jsonschema too")
    args = parser.parse_args()
    from backends.ark_model import emit_model
    from frontends.model_zoo import generated

    with tempfile.TemporaryDirectory() as tmp:
        model = Path(tmp) / f"generated_{args.ops}.json"
        model.write_text(emit_model(generated(args.ops)))
        measure(model, args.repeat, args.reference)
    files = args.files or sorted(CORPUS.rglob("*.json"), key=lambda p: -p.stat().st_size)[:1]
    for path in files:
        measure(path, args.repeat, args.reference)


if __name__ == "__main__":
    main()
