"""Messages a new user meets (issue 27): near matches for misspelt names, unknown ARK operator
types refused with one message everywhere, options a command would ignore, and reports that
say what their figures are."""

from __future__ import annotations

import json

import pytest

from backends import TARGETS, cannot_make, make_options, target_named
from frontends import FORMATS
from ground.diagnostics import UnsupportedInput, near_match
from passes import PASSES, pass_listing, pass_options
from tests.conftest import EXAMPLES, small_ffn_doc, write_json


@pytest.fixture(scope="module")
def sigmod(tmp_path_factory):
    """The small ffn with its Sigmoid misspelt: a type ARK's runtime does not register."""
    doc = small_ffn_doc()
    node = next(n for n in doc["Nodes"] if n["Op"]["Type"] == "Sigmoid")
    node["Op"]["Type"] = "Sigmod"
    return write_json(tmp_path_factory.mktemp("sigmod") / "sigmod.json", doc)


def one_error(result, *expected):
    assert result.code == 1, result.err
    assert result.err.count("\n") == 1 and result.err.startswith("planc: error: "), result.err
    for text in expected:
        assert text in result.err, result.err
    return result.err


def test_near_match_folds_case_and_stays_quiet_when_nothing_is_close():
    assert near_match("A100", ["a100", "h100", "mi300x"]) == "a100"
    assert near_match("Sigmod", ["Sigmoid", "Sqrt", "Sub"]) == "Sigmoid"
    assert near_match("zzz", ["a100", "h100"]) is None


@pytest.mark.parametrize("strict", [False, True])
def test_check_refuses_an_unknown_operator_type_with_a_near_match(planc, sigmod, strict):
    result = planc("check", *(["--strict"] if strict else []), "--json", sigmod)
    assert result.code == 1
    (finding,) = result.json()["findings"]
    assert finding["rule"] == "ark-model.operator-type" and finding["severity"] == "error"
    assert finding["path"].endswith(".Op.Type")
    assert "unknown ARK operator type 'Sigmod': did you mean Sigmoid?" in finding["message"]


def test_an_unknown_operator_type_without_a_near_match_lists_the_known(planc, tmp_path):
    doc = small_ffn_doc()
    doc["Nodes"][1]["Op"]["Type"] = "Zzyzx"
    result = planc("check", write_json(tmp_path / "z.json", doc))
    one_error(result, "unknown ARK operator type 'Zzyzx' (ARK's operator types: Add, Cast,")


TRANSLATING = [t.name for t in TARGETS if t.name not in ("mlir", "ark-model")]


def test_every_target_refuses_an_unknown_operator_with_the_same_message(planc, sigmod, tmp_path):
    errors = {}
    for target in TRANSLATING:
        errors[target] = one_error(planc(sigmod, "-t", target, "-o", tmp_path / target))
        assert not (tmp_path / target).exists()
    assert len(set(errors.values())) == 1, errors
    assert "did you mean Sigmoid?" in errors["ark"]
    assert planc("simulate", sigmod).err == errors["ark"]


def test_unknown_operators_still_round_trip(planc, sigmod, tmp_path):
    out = tmp_path / "m.json"
    assert planc(sigmod, "-t", "ark-model", "-o", out).code == 0
    assert json.loads(out.read_text()) == json.loads(sigmod.read_text())


def test_a_plan_with_an_unknown_operator_fails_check(planc, ffn_plan):
    ffn_plan.write_text(ffn_plan.read_text().replace('"Sigmoid"', '"Sigmod"'))
    one_error(planc("check", ffn_plan), "[ark-plan.operator-type]", "did you mean Sigmoid?")
    one_error(planc(ffn_plan, "-t", "cpu", "-o", ffn_plan.parent / "prog"),
              "did you mean Sigmoid?")


@pytest.mark.parametrize("argv, expected", [
    (["-t", "ark", "--arch", "A100"], "unknown device 'A100': did you mean a100?"),
    (["-t", "tt", "--arch", "Blackhol"], "'Blackhol': did you mean blackhole?"),
    (["-t", "tt-metl"], "unknown target 'tt-metl': did you mean tt-metal?"),
    (["--pipeline", "ark-compres"], "--pipeline: unknown pass 'ark-compres': did you mean "
                                    "ark-compress?"),
    (["--pipeline", "ark-compress{renumbr=false}"],
     "--pipeline: pass ark-compress has no option 'renumbr': did you mean renumber?"),
    # xDSL's own words were "Incompatible types: given (3,), expected <class 'bool'>", with
    # every pass listed.
    (["--pipeline", "ark-compress{renumber=3}"],
     "--pipeline: pass ark-compress: option renumber takes a value of type bool, got 3"),
    (["--pipeline", "dnn-from-ark,gemini-group-layers{dram-bw=16}"],
     "option dram-bw takes a value of type float, got 16 (write 16.0)"),
])
def test_near_matches_on_the_command_line(planc, argv, expected):
    one_error(planc(EXAMPLES / "ffn.json", *argv), expected)


@pytest.mark.parametrize("argv, expected", [
    # argparse's choices said only "invalid choice: 'allreduc' (choose from ...)".
    (["--collective", "allreduc", "--ranks", "4", "-t", "mscclpp"],
     "argument --collective: invalid choice: 'allreduc': did you mean allreduce? (choose from "
     "allreduce, allgather, reducescatter, broadcast, alltoall)"),
    ([EXAMPLES / "ffn.json", "--from", "ark-modle"], "did you mean ark-model?"),
    ([EXAMPLES / "ffn.json", "-t", "tt", "--partition", "blok"], "did you mean block?"),
    (["schema", "ark-modle"], "planc schema: error: argument NAME: invalid choice: "
                              "'ark-modle': did you mean ark-model?"),
    (["tune", EXAMPLES / "ffn.json", "-t", "ark", "--objective", "tim"],
     "did you mean time?"),
    ([EXAMPLES / "ffn.json", "-t", "ark", "--planner", "ark-defualt"],
     "unknown planner 'ark-defualt': did you mean ark-default?"),
    ([EXAMPLES / "ffn.json", "-t", "tt", "--partition", "zzzz"],
     "invalid choice: 'zzzz' (choose from auto, row_major"),
])
def test_choices_and_planners_get_near_matches_too(capsys, argv, expected):
    from compiler.driver import main

    try:
        code = main([str(a) for a in argv])
    except SystemExit as ended:       # argparse's refusals end the process
        code = ended.code
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1, err
    assert expected in err, err


def test_an_unknown_mscclpp_hardware_is_an_option_error_with_a_near_match(planc, tmp_path):
    """It was `FILE: unknown hardware model 'A100' (known: a100, h100)`: no suggestion, and
    blamed on the plan."""
    plan = tmp_path / "ar.json"
    assert planc("--collective", "allreduce", "--ranks", "4", "-t", "mscclpp", "-o",
                 plan).code == 0
    one_error(planc("simulate", plan, "--mscclpp-hw", "A100"),
              "planc: error: unknown hardware model 'A100': did you mean a100? (known: a100, "
              "h100)")


def test_the_api_raises_argument_error_for_every_misnamed_name(small_ffn):
    """The API documents `ArgumentError` for a misnamed name; an unknown device and planner
    were plain `UsageError`s (not `ValueError`s either)."""
    import compiler as api

    for options in ({"arch": "A100"}, {"planner": "ark-defualt"}):
        with pytest.raises(api.ArgumentError, match="did you mean"):
            api.compile(small_ffn, "ark", **options)
    with pytest.raises(ValueError, match="did you mean wormhole_b0"):
        api.compile(small_ffn, "tt", arch="wormhole")


def test_planc_tune_names_the_nearest_target(planc, tmp_path):
    one_error(planc("tune", EXAMPLES / "ffn.json", "-t", "gemeni", "-o", tmp_path / "x"),
              "did you mean gemini?")


def test_a_pipeline_that_makes_no_plan_says_which_passes_do(planc):
    err = one_error(planc(EXAMPLES / "ffn.json", "--pipeline", "sched-fuse", "-t", "ark"),
                    "needs an ARK plan, and the pipeline ended without one",
                    "the IR holds ark.model", "sched-to-plan")
    assert "expected one plan.plan" not in err


@pytest.mark.parametrize("target", [t.name for t in TARGETS])
def test_targets_declare_the_formats_their_pipelines_start_from(target):
    """`TargetInfo.sources` (which error messages name) against what `pipeline` accepts."""
    info = target_named(target)
    backend, options = info.load(), make_options(target)
    for fmt in FORMATS:
        try:
            backend.pipeline(fmt.name, options)
            accepted = True
        except UnsupportedInput as e:
            accepted = False
            message = str(cannot_make(e))
            assert f"--target {target} takes" in message
            assert f"{fmt.name} documents go to --target" in message
        assert accepted == (fmt.name in info.sources), fmt.name


def test_cannot_make_names_the_targets_that_take_the_document(planc, ffn_plan):
    one_error(planc(ffn_plan, "-t", "gemini"),
              "cannot make a Gemini schedule from an ark-plan document (--target gemini takes "
              "ark-model, gemini-ir or gemini-layers documents; ark-plan documents go to "
              "--target ark-model, ark, cpu, cuda or mlir)")


@pytest.mark.parametrize("command, flags, document, expected", [
    ("simulate", ["--message-size", "1MB"], "plan", "--message-size does not apply to ark-plan "
     "documents: planc simulate reads it for mscclpp documents only"),
    ("simulate", ["--arch", "h100"], "model", "--arch does not apply to ark-model documents"),
    ("simulate", ["--full-run-limit", "9"], "model", "--full-run-limit does not apply"),
    ("check", ["--ark-runtime", "planc"], "model", "--ark-runtime does not apply to ark-model"),
    ("check", ["--arch", "blackhole"], "model", "--arch does not apply to ark-model documents: "
     "planc check reads it for ark-plan, tt or mscclpp documents only"),
])
def test_an_option_the_command_ignores_for_the_format_is_an_error(planc, ffn_plan, small_ffn,
                                                                   command, flags, document,
                                                                   expected):
    path = ffn_plan if document == "plan" else small_ffn
    one_error(planc(command, path, *flags), expected)


def test_options_that_apply_still_work(planc, ffn_plan):
    assert planc("simulate", ffn_plan, "--arch", "h100", "--cost-only").code == 0
    assert planc("check", ffn_plan, "--ark-runtime", "planc").code == 0


def test_reports_say_what_their_figures_are(planc, small_ffn, ffn_plan):
    report = planc("simulate", small_ffn).out
    assert "  outputs  tensor 15: shape" in report and "inputs   tensor 0: [" in report
    report = planc("simulate", ffn_plan, "--cost-only").out
    (line,) = [x for x in report.splitlines() if x.lstrip().startswith("slowest task groups")]
    assert ", time " in line and "seconds" not in line


# ---------------------------------------------------------------------------------------------
# planc-opt
# ---------------------------------------------------------------------------------------------


def test_opt_places_a_verifier_error_at_the_op(opt, tmp_path):
    bad = tmp_path / "v.mlir"
    bad.write_text('"builtin.module"() ({\n  "ark.model"() : () -> ()\n}) : () -> ()\n')
    code, _, err = opt(bad)
    assert code == 1
    assert err == f"planc-opt: error: {bad}:2:3: 'ark.model' op: Expected 1 region, but got 0\n"


def test_opt_keeps_xdsls_caret_snippet_for_parse_errors(opt, tmp_path):
    bad = tmp_path / "p.mlir"
    bad.write_text("builtin.module {\n  %0 = ark.view : !ark.tensor<0, FP16, [1, 2\n}\n")
    code, _, err = opt(bad)
    assert code == 1
    assert err == f"planc-opt: error: {bad}:3:1: ']' expected\n}}\n^\n"


@pytest.mark.parametrize("type_text, line", [
    # The error was placed on the token after the type, here the block's closing `}`, and
    # named no near data type.
    ("!ark.tensor<0, FP17, [1, 256], buffer 0>",
     ":3:37: tensor 0: unknown data type 'FP17': did you mean FP16? (expected one of FP32"),
    ("!ark.tensor<0, FP16, [1, 256], strides [1, 2], buffer 0>",
     ":3:33: tensor 0: offsets + shape exceed strides in dim 1 (0 + 256 > 2)"),
])
def test_opt_places_a_tensor_type_error_at_the_type(opt, tmp_path, type_text, line):
    bad = tmp_path / "t.mlir"
    bad.write_text(f"builtin.module {{\n  ark.model rank 0 of 1 {{\n    %t0 = ark.view : "
                   f"{type_text}\n  }}\n}}\n")
    code, _, err = opt(bad)
    first, snippet, caret = err.splitlines()
    assert code == 1 and first.startswith(f"planc-opt: error: {bad}{line}"), err
    assert snippet.strip().startswith("%t0 = ark.view") and caret.strip().startswith("^")


def test_a_misspelt_enumeration_value_gets_the_nearest(planc, tmp_path):
    doc = small_ffn_doc()
    doc["Nodes"][0]["Op"]["ReadTensors"][0]["DataType"] = "FP17"
    one_error(planc("check", write_json(tmp_path / "m.json", doc)),
              "DataType: expected FP32, FP16, BF16, INT32, UINT32, INT8, UINT8 or BYTE, got "
              "\"FP17\": did you mean FP16?")


def test_opt_names_the_nearest_pass(opt, tmp_path):
    model = write_json(tmp_path / "m.json", small_ffn_doc())
    code, _, err = opt(model, "-p", "sched-partition{splitk=false}")
    assert code == 1 and "did you mean split-k?" in err and err.count("\n") == 1


def test_opt_names_the_pass_and_option_of_a_value_of_the_wrong_type(opt, tmp_path):
    """It was `planc-opt: internal error: ValueError: Incompatible types ...`, exit 2."""
    model = write_json(tmp_path / "m.json", small_ffn_doc())
    code, _, err = opt(model, "-p", "ark-to-sched,sched-fuse,sched-tile,"
                       "sched-partition{granularity=x}")
    assert (code, err) == (1, "planc-opt: error: -p: pass sched-partition: option granularity "
                              "takes a value of type int, got 'x'\n")


@pytest.mark.parametrize("flag", ["--list-passes", "--help"])
def test_opt_lists_every_pass_with_its_options(capsys, flag):
    from compiler.opt import run

    with pytest.raises(SystemExit) as ended:
        run([flag])
    listing = capsys.readouterr().out
    assert ended.value.code == 0 and listing.endswith(pass_listing())
    for name, _, _ in PASSES:
        assert f"\n  {name} " in listing
    assert "  sched-partition            Spread the tiles" in listing
    for option, kind, default in pass_options("sched-partition"):
        assert f"{option}: {kind} = {default}" in listing
    assert "split-k: bool = true" in listing


@pytest.mark.parametrize("command", ["check", "simulate", "plot"])
def test_a_commands_help_lists_its_own_options_only(command, planc, ffn_plan, tmp_path):
    """`planc check --help` listed some forty target options (--generic, --mesh ...), each of
    which it refuses; one given still names who takes it."""
    from backends import COMMAND_FLAGS
    from compiler.driver import parser_for

    listed = parser_for(command).format_help()
    assert "--mesh" not in listed and "--generic" not in listed and "--planner" not in listed
    for flag in COMMAND_FLAGS[command]:
        assert f"  {flag.name} " in listed, flag.name
    argv = [command, ffn_plan, "--mesh", "2x2"] + (["-o", tmp_path / "x.png"]
                                                   if command == "plot" else [])
    one_error(planc(*argv), f"--mesh is not an option of planc {command} (it is one of "
                            "--target gemini)")


# A second fresh try as a new user (issue 27) found these still wrong.

def test_pass_listing_shows_unset_options_as_optional_not_as_none():
    """`--list-passes` showed `arch: str | None = none`, and `tt-partition{arch=none}` was then
    refused: xDSL lists a None default as `none`, which a pipeline passes as a string."""
    listing = pass_listing()
    assert "= none" not in listing
    assert "arch: str (optional)" in listing and "split-k: bool = true" in listing


@pytest.fixture(scope="module")
def allreduce(tmp_path_factory):
    from compiler.driver import main

    path = tmp_path_factory.mktemp("allreduce") / "allreduce.json"
    assert main(["--collective", "allreduce", "--ranks", "2", "-t", "mscclpp", "-o", str(path),
                 "-q"]) == 0
    return path


@pytest.mark.parametrize("command", ["simulate", "plot"])
def test_a_message_of_zero_bytes_is_refused(planc, tmp_path, allreduce, command):
    """`--message-size 0` was accepted: nothing to cut into chunks (the executor refuses it)."""
    out = ["-o", str(tmp_path / "a.png")] if command == "plot" else []
    one_error(planc(command, allreduce, "--message-size", "0", *out), "--message-size",
              "above 0 bytes")
    assert not (tmp_path / "a.png").exists()


def test_a_negative_full_run_limit_is_refused(planc, ffn_plan):
    one_error(planc("simulate", ffn_plan, "--full-run-limit", "-3"), "--full-run-limit",
              "0 or more, got -3")


def test_plot_says_it_wrote_one_image_of_panels(planc, tmp_path, allreduce):
    """It said "N pictures" for one image file holding N panels."""
    image = tmp_path / "a.png"
    result = planc("plot", allreduce, "-o", image)
    assert result.code == 0, result.err
    assert result.out.startswith(f"{image}: 1 image of ") and " panel" in result.out
