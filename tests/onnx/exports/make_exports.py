"""Make the small real exports beside this script: tiny GPT-2, BERT and Llama (Hugging Face
transformers, random weights from a fixed seed) written by both of torch.onnx's exporters.

torch and transformers are not test dependencies: the exports are committed, and this script
says how they were made. To regenerate, in a throw-away environment outside the repository:

    python3 -m venv /tmp/venv-export
    /tmp/venv-export/bin/pip install torch transformers onnx onnxscript
    /tmp/venv-export/bin/python tests/onnx/exports/make_exports.py

(made with torch 2.13.0+cpu, transformers 5.24.0, onnx 1.23.2, onnxscript 0.7.2). Each file
is `<model>_<exporter>.onnx` (exporter `torchscript`: dynamo=False, opset 17; `dynamo`:
dynamo=True, opset 18), with static shapes (batch 1, sequence 8), doc strings, metadata and
value_info stripped, and its weights inside.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import onnx
import torch
import transformers

HERE = Path(__file__).parent
SEQ, VOCAB = 8, 128
COMMON = {"vocab_size": VOCAB, "hidden_size": 32, "num_hidden_layers": 2,
          "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 16}


def gpt2():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2,
                                     n_inner=64, n_positions=16)
    return transformers.GPT2LMHeadModel(config), ["input_ids"]


def bert():
    config = transformers.BertConfig(**COMMON)
    return transformers.BertModel(config), ["input_ids", "attention_mask"]


def llama():
    config = transformers.LlamaConfig(**COMMON, num_key_value_heads=2)
    return transformers.LlamaForCausalLM(config), ["input_ids"]


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama}


class Logits(torch.nn.Module):
    """The model's first output as one tensor (no cache, no dict): what a plan computes."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs):
        given = dict(zip(self.names, inputs, strict=True))
        # The causal LMs see a batch without padding: their mask is all ones, a constant of
        # the export (without any mask, transformers looks for packed sequences with
        # aten::diff, which the TorchScript exporter lacks).
        given.setdefault("attention_mask", torch.ones_like(inputs[0]))
        out = self.model(**given, use_cache=False, return_dict=True)
        return out.logits if hasattr(out, "logits") else out.last_hidden_state


def strip(model: onnx.ModelProto) -> onnx.ModelProto:
    """No doc strings, metadata or value_info: the file holds the graph and its weights."""
    model.doc_string = ""
    model.producer_version = ""
    del model.metadata_props[:]
    graph = model.graph
    graph.doc_string = ""
    del graph.value_info[:]
    for node in graph.node:
        node.doc_string = ""
        del node.metadata_props[:]
    for function in model.functions:
        function.doc_string = ""
        for node in function.node:
            node.doc_string = ""
            del node.metadata_props[:]
    return model


def export(name: str, dynamo: bool) -> Path:
    torch.manual_seed(0)
    model, names = MODELS[name]()
    model.eval()
    wrapped = Logits(model, names)
    inputs = tuple(torch.randint(0, VOCAB, (1, SEQ)) if n == "input_ids"
                   else torch.ones(1, SEQ, dtype=torch.int64) for n in names)
    path = HERE / f"{name}_{'dynamo' if dynamo else 'torchscript'}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            program = torch.onnx.export(wrapped, inputs, input_names=names,
                                        output_names=["logits"], dynamo=True, opset_version=18,
                                        optimize=True)
            onnx_model = program.model_proto
        else:
            buffer = HERE / ".scratch.onnx"
            torch.onnx.export(wrapped, inputs, str(buffer), input_names=names,
                              output_names=["logits"], dynamo=False, opset_version=17)
            onnx_model = onnx.load(buffer)
            buffer.unlink()
    onnx.save(strip(onnx_model), path)
    return path


def main(argv: list[str]) -> None:
    for name in argv or MODELS:
        for dynamo in (False, True):
            path = export(name, dynamo)
            print(f"{path.name}: {path.stat().st_size:,} bytes")


if __name__ == "__main__":
    main(sys.argv[1:])
