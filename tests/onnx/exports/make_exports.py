"""Make the small real exports beside this script, written by both of torch.onnx's exporters
with random weights from a fixed seed: tiny GPT-2, BERT, Llama, DistilBERT, Qwen2 and ViT
(Hugging Face transformers), and two small CNNs written here in torch (`resnet`: ResNet basic
blocks with batch norm, max pooling and a strided 1x1 shortcut; `mobilenet`: MobileNetV2
inverted residuals with ReLU6 and depthwise convolutions, a MobileNetV3 squeeze-excite with
HardSwish and HardSigmoid, average pooling without padding in its divisor). torchvision is not
needed: its ResNet-18 has no width setting, and these blocks are its layers at a width that
keeps the files small.

torch and transformers are not test dependencies: the exports are committed, and this script
says how they were made. To regenerate, in a throw-away environment outside the repository:

    python3 -m venv /tmp/venv-export
    /tmp/venv-export/bin/pip install torch transformers onnx onnxscript
    /tmp/venv-export/bin/python tests/onnx/exports/make_exports.py

(made with torch 2.13.0+cpu, transformers 5.24.0, onnx 1.23.2, onnxscript 0.7.2). Each file
is `<model>_<exporter>.onnx` (exporter `torchscript`: dynamo=False, opset 17; `dynamo`:
dynamo=True, opset 18), with static shapes (batch 1, sequence 8; images 1x3x32x32, ViT 1x3x16x16), doc strings, metadata and
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


def distilbert():
    config = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2,
                                           hidden_dim=64, max_position_embeddings=16)
    return transformers.DistilBertModel(config), ["input_ids", "attention_mask"]


def qwen2():
    # grouped-query attention: 2 query heads share one key/value head
    config = transformers.Qwen2Config(**COMMON, num_key_value_heads=1)
    return transformers.Qwen2ForCausalLM(config), ["input_ids"]


def vit():
    config = transformers.ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32,
                                    num_hidden_layers=2, num_attention_heads=2,
                                    intermediate_size=64)
    return transformers.ViTModel(config, add_pooling_layer=False), ["pixel_values"]


def conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1):
    return torch.nn.Sequential(
        torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2, groups=groups, bias=False),
        torch.nn.BatchNorm2d(cout))


class BasicBlock(torch.nn.Module):
    """ResNet-18's block: two 3x3 convolutions, the shortcut a strided 1x1 where shapes change."""

    def __init__(self, cin: int, cout: int, stride: int):
        super().__init__()
        self.a, self.b = conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3)
        self.short = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        y = self.b(torch.relu(self.a(x)))
        return torch.relu(y + (x if self.short is None else self.short(x)))


class ResNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(conv_bn(3, 8, 7, 2), torch.nn.ReLU(),
                                        torch.nn.MaxPool2d(3, 2, 1))
        self.blocks = torch.nn.Sequential(BasicBlock(8, 8, 1), BasicBlock(8, 16, 2))
        self.head = torch.nn.Linear(16, 10)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class InvertedResidual(torch.nn.Module):
    """MobileNetV2's block (1x1 expand, depthwise 3x3, 1x1 project; ReLU6), with MobileNetV3's
    squeeze-excite and HardSwish where `se`."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, se: bool):
        super().__init__()
        mid = cin * expand
        act = torch.nn.Hardswish if se else torch.nn.ReLU6
        self.expand = torch.nn.Sequential(conv_bn(cin, mid, 1), act())
        self.depthwise = torch.nn.Sequential(conv_bn(mid, mid, 3, stride, groups=mid), act())
        self.se = torch.nn.Sequential(
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Conv2d(mid, 8, 1), torch.nn.ReLU(),
            torch.nn.Conv2d(8, mid, 1), torch.nn.Hardsigmoid()) if se else None
        self.project = conv_bn(mid, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.depthwise(self.expand(x))
        if self.se is not None:
            y = y * self.se(y)
        y = self.project(y)
        return x + y if self.residual else y


class MobileNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Sequential(conv_bn(3, 8, 3, 2), torch.nn.ReLU6())
        self.blocks = torch.nn.Sequential(InvertedResidual(8, 8, 1, 2, False),
                                          InvertedResidual(8, 12, 2, 3, True),
                                          InvertedResidual(12, 12, 1, 2, True))
        self.pool = torch.nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.head = torch.nn.Sequential(torch.nn.Dropout(0.2), torch.nn.Linear(12, 10))

    def forward(self, x):
        y = self.pool(self.blocks(self.stem(x)))
        return self.head(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


def resnet():
    return ResNet(), ["pixel_values"]


def mobilenet():
    return MobileNet(), ["pixel_values"]


MODELS = {"gpt2": gpt2, "bert": bert, "llama": llama, "distilbert": distilbert,
          "qwen2": qwen2, "vit": vit, "resnet": resnet, "mobilenet": mobilenet}
IMAGES = {"vit": (1, 3, 16, 16), "resnet": (1, 3, 32, 32), "mobilenet": (1, 3, 32, 32)}


class Logits(torch.nn.Module):
    """The model's first output as one tensor (no cache, no dict): what a plan computes."""

    def __init__(self, model, names):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs):
        if not isinstance(self.model, transformers.PreTrainedModel):
            return self.model(*inputs)
        given = dict(zip(self.names, inputs, strict=True))
        if "pixel_values" in given:
            return self.model(**given, return_dict=True).last_hidden_state
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
                   else torch.randn(IMAGES[name]) if n == "pixel_values"
                   else torch.ones(1, SEQ, dtype=torch.int64) for n in names)
    output = "logits"   # the one output's name, whatever the model calls it
    path = HERE / f"{name}_{'dynamo' if dynamo else 'torchscript'}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            program = torch.onnx.export(wrapped, inputs, input_names=names,
                                        output_names=[output], dynamo=True, opset_version=18,
                                        optimize=True)
            onnx_model = program.model_proto
        else:
            buffer = HERE / ".scratch.onnx"
            torch.onnx.export(wrapped, inputs, str(buffer), input_names=names,
                              output_names=[output], dynamo=False, opset_version=17)
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
