"""mkdocs hooks: pages made from planc itself when the site is built.

* `index.md` is the README (links into the repository point at the files);
* `cli.md` is the help of every `planc` command, from the parsers the command line uses;
* `pictures.md` and its images are `planc plot` of plans made from the shipped examples.
"""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def on_files(files: Files, config) -> Files:
    for uri, content in (("index.md", readme()), ("cli.md", cli_reference())):
        files.append(File.generated(config, uri, content=content))
    page, images = pictures()
    files.append(File.generated(config, "pictures.md", content=page))
    for uri, data in images.items():
        files.append(File.generated(config, uri, content=data))
    return files


def readme() -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = text.replace("docs/architecture.md", "architecture.md")
    text = text.replace("(docs/images/", "(images/")
    # Other links into the checkout are not pages of the site: show them as code.
    return re.sub(r"\[([^\]]+)\]\((?!https?:|architecture\.md|images/)([^)]+)\)", r"`\1`", text)


def cli_reference() -> str:
    from compiler.driver import SUBCOMMANDS, compile_parser, parser_for

    sections = ["# Command line\n",
                "Generated from the parsers of `planc` itself. Each target and command takes "
                "only its own options; another's is an error naming who takes it.\n",
                "## planc INPUT --target NAME\n", "```text\n" + _help(compile_parser()) + "```\n"]
    for command in SUBCOMMANDS:
        sections += [f"## planc {command}\n", "```text\n" + _help(parser_for(command))
                     + "```\n"]
    return "\n".join(sections)


def _help(parser) -> str:
    import os

    os.environ["COLUMNS"] = "100"  # argparse wraps help text to the terminal's width
    return parser.format_help()


EXAMPLES = (
    ("ffn.json", "ark", ["--arch", "a100"], "ffn_a100.png",
     "The README's main job: the FFN example planned for an A100 (`planc examples/ffn.json "
     "--target ark --arch a100`), its timeline over the cost model's time and the bytes of its "
     "buffers in use."),
    ("ffn.json", "tt", ["--grid", "4x4"], "ffn_tt_4x4.png",
     "The FFN example on a 4x4 Tensix grid: its kernels over the cost model's time, with where "
     "each kernel's operands live (L1 or DRAM), and the work of every core, kernel by kernel "
     "(output tiles x K tiles for a matmul, output tiles for an element-wise kernel)."),
    ("attention.json", "gemini", ["--mesh", "2x2"], "attention_gemini_2x2.png",
     "The attention example scheduled on a 2x2 Gemini mesh: each core's workloads (compute "
     "time at Gemini's 1 GHz clock) and its L2 occupancy."),
    (None, "mscclpp", ["--collective", "allreduce", "--ranks", "4"],
     "allreduce_mscclpp_4.png",
     "A 4-rank all-reduce synthesized for MSCCL++ (`planc --collective allreduce --ranks 4 -t "
     "mscclpp`): every thread block of every GPU over the alpha-beta model's time, one bar per "
     "operation."),
)


def pictures() -> tuple[str, dict[str, bytes]]:
    import tempfile

    from compiler.api import compile, load
    from compiler.driver import main
    from compiler.plot import draw
    from compiler.plot import pictures as drawn

    page = ["# Pictures of the examples\n",
            "Drawn by `planc plot` from plans of the shipped examples when this site was "
            "built.\n"]
    images: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as scratch:
        for example, target, flags, name, caption in EXAMPLES:
            plan = Path(scratch) / f"{name}.json"
            options = dict(zip((f.lstrip("-").replace("-", "_") for f in flags[::2]),
                               flags[1::2], strict=True))
            if example is None:     # synthesized: no input file
                assert main([*flags, "--target", target, "-o", str(plan)]) == 0
            else:
                compile(ROOT / "examples" / example, target, output=plan, **options)
            image = io.BytesIO()
            draw(drawn(load(plan)), image)
            images[f"pictures/{name}"] = image.getvalue()
            what = example or " ".join(flags)
            page += [f"## {what}, target {target}\n", caption + "\n",
                     f"![{what} {target}](pictures/{name})\n"]
    return "\n".join(page), images
