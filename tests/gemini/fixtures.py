"""A small, hand-written Gemini scheduler IR that exercises every entry kind.

One core, two workloads: `quant` (vector processor) turns the network input (transfer 1, read
from DRAM) into transfer 2; `conv` (PE array, weights = transfer 0 read straight into WL0)
consumes it and stores its output (transfer 3) to DRAM. DRAM queue: input load, weight load,
output store (tensor_order 0, 1, 2; M = 3 for on-chip tensors).
"""

from __future__ import annotations

import copy
from typing import Any

BOX = [[0, 0, 0, 0], [0, 7, 7, 7]]


def _dest(wl: int, layer: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"core_id": 0, "type": "core", "workload_id": wl}
    if layer:
        out["layer_name"] = layer
    return out


def small_schedule() -> dict[str, Any]:
    lower, upper = BOX
    tile = {"ifmap_lower": lower, "ifmap_upper": upper, "ofmap_lower": lower,
            "ofmap_upper": upper, "single_tile_time_pred": 30.0,
            "tile_padding_tblr": [0, 0, 0, 0]}
    wl0 = {"address": 0, "align": 8, "bitwidth": 8, "layer_name": "conv", "lower": lower,
           "upper": [0, 7, 7, 8], "size": 13, "source": "DDR", "tensor_order": 1,
           "transfer_id": [0]}
    quant = {
        "workload_id": 0, "layer_name": "quant", "layer_type": "vp", "workload": BOX,
        "ofmap_size": 512, "time": 30, "tile_padding_tblr": [0, 0, 0, 0],
        "ring_buffer_info": [[0, 65536]],
        "ifmap": [{"align": 8, "bitwidth": 8, "lower": lower, "upper": upper, "size": 512,
                   "transfer_id": [1]}],
        "ofmap": [{"lower": lower, "upper": upper, "size": 512, "transfer_id": 2,
                   "destination": [_dest(1)]}],
        "buffer": [
            {"tensor_id": 0, "type": "ifmap", "address": 0, "size": 512, "align": 8,
             "bitwidth": 8, "lower": lower, "upper": upper, "transfer_id": [1],
             "tensor_order": 0, "newly_added": True, "cur_wl_ifmap": True,
             "source": [{"core_id": -1, "layer_name": "input", "type": "DRAM", "transfer_id": 1,
                         "lower": lower, "upper": upper, "size": 512}]},
            {"tensor_id": 1, "type": "ifmap", "address": 512, "size": 512, "align": 8,
             "bitwidth": 8, "lower": lower, "upper": upper, "transfer_id": [2],
             "tensor_order": 3, "newly_added": True,
             "source": [{"core_id": 0, "layer_name": "quant", "type": "core", "transfer_id": 2,
                         "lower": lower, "upper": upper, "size": 512}]},
        ],
        "wl0_buffer": [wl0],
        "tile_info": {"tile_num_0": tile},
    }
    conv_tile = dict(tile, layer_name="conv", cut_mode="KC", loop_order="KNHW",
                     act_mini_tile=[1, 8, 4, 4], out_mini_tile=[1, 8, 4, 4], mtc0_mtk0=[1, 1],
                     ci_cut_num=1, tile_padding_tblr=[1, 1, 1, 1])
    conv = {
        "workload_id": 1, "layer_name": "conv", "layer_type": "pe", "workload": BOX,
        "ofmap_size": 512, "time": 40, "tile_padding_tblr": [1, 1, 1, 1],
        "ring_buffer_info": [[0, 65536]],
        "ifmap": [{"align": 8, "bitwidth": 8, "lower": lower, "upper": upper, "size": 512,
                   "transfer_id": [2]}],
        "ofmap": [{"lower": lower, "upper": upper, "size": 512, "transfer_id": 3,
                   "destination": [{"core_id": -1, "type": "DRAM"}]}],
        "weight": {"lower": lower, "upper": [0, 7, 7, 8], "size": 832, "transfer_id": [0]},
        "buffer": [
            {"tensor_id": 1, "type": "ifmap", "address": 512, "size": 512, "align": 8,
             "bitwidth": 8, "lower": lower, "upper": upper, "transfer_id": [2],
             "tensor_order": 3, "newly_added": False, "cur_wl_ifmap": True,
             "source": [{"core_id": 0, "layer_name": "quant", "type": "core", "transfer_id": 2,
                         "lower": lower, "upper": upper, "size": 512}]},
            {"tensor_id": 2, "type": "ofmap", "address": 0, "size": 512, "align": 8,
             "bitwidth": 8, "layer_name": "conv", "lower": lower, "upper": upper,
             "tensor_order": 2, "start_send": True},
        ],
        "wl0_buffer": [copy.deepcopy(wl0)],
        "tile_info": {"tile_num_0": conv_tile},
    }
    return {
        "-1": {
            "in": [{"core_id": 0, "layer_name": "conv", "workload_id": 1, "transfer_id": 3,
                    "lower": lower, "upper": upper, "related_ofmap": []}],
            "out": [
                {"type": "weight", "transfer_id": 0, "lower": lower, "upper": [0, 7, 7, 8],
                 "size": 832, "related_ifmap": [], "destination": [_dest(1, "conv")]},
                {"type": "fmap", "transfer_id": 1, "lower": lower, "upper": upper, "size": 512,
                 "related_ifmap": [], "destination": [_dest(0, "quant")]},
            ],
        },
        "0": [quant, conv],
        "buffersize": 65536,
        "top_batch_cut": 1,
        "xlen": 1,
        "ylen": 1,
    }


def _layer(index: int, name: str, operation: str, prev: list[str], nxt: list[str],
           in_shapes: list[list[int]], in_types: list[str], out_shape: list[int], out_type: str,
           **more: Any) -> dict[str, Any]:
    layer = {"layer_index": index, "name": name, "operation": operation, "device": "npu",
             "input_dtype": in_types, "output_dtype": [out_type], "input_shape": in_shapes,
             "output_shape": [out_shape], "previous_layer": prev, "next_layer": nxt}
    layer.update(more)
    return layer


def small_network() -> dict[str, Any]:
    """A Gemini frontend layer description with every layer kind of the ResNet files: quantize,
    3x3 and strided 1x1 convolutions, max and global-average pooling, a dequantize + residual
    add, a dense layer and the final reshape (16x16 input, 8 channels)."""
    conv = {"activation_type": "relu", "activation_attr": None,
            "quant_info": {"input_scale1": 0.02, "output_zero_point": -128.0}}
    layers = [
        _layer(0, "q", "quantize", ["input1"], ["conv1"], [[1, 8, 16, 16]], ["float16"],
               [1, 8, 16, 16], "int8", tensor_mode=0),
        _layer(1, "conv1", "conv2d", ["q", "constant_conv1_weight"], ["pool"],
               [[1, 8, 16, 16], [16, 8, 3, 3]], ["int8", "int8"], [1, 16, 16, 16], "int8",
               kernel_size=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1], **conv),
        _layer(2, "pool", "max_pool2d", ["conv1"], ["conv2", "deq"], [[1, 16, 16, 16]],
               ["int8"], [1, 16, 8, 8], "int8", pool_size=[3, 3], stride=[2, 2],
               padding=[1, 1, 1, 1], ceil_mode=0),
        _layer(3, "conv2", "conv2d", ["pool", "constant_conv2_weight"], ["add"],
               [[1, 16, 8, 8], [16, 16, 3, 3]], ["int8", "int8"], [1, 16, 8, 8], "float16",
               kernel_size=[3, 3], stride=[1, 1], padding=[1, 1, 1, 1]),
        _layer(4, "deq", "quantize", ["pool"], ["add"], [[1, 16, 8, 8]], ["int8"],
               [1, 16, 8, 8], "float16"),
        _layer(5, "add", "element_wise_add", ["conv2", "deq"], ["conv3"],
               [[1, 16, 8, 8], [1, 16, 8, 8]], ["float16", "float16"], [1, 16, 8, 8], "int8",
               module_list={"relu_group": {}}),
        _layer(6, "conv3", "conv2d", ["add", "constant_conv3_weight"], ["gap"],
               [[1, 16, 8, 8], [32, 16, 1, 1]], ["int8", "int8"], [1, 32, 4, 4], "int8",
               kernel_size=[1, 1], stride=[2, 2], padding=[0, 0, 0, 0]),
        _layer(7, "gap", "avg_pool2d", ["conv3", "gap_constant1"], ["fc"],
               [[1, 32, 4, 4], [1, 1, 1, 1]], ["int8", "float32"], [1, 32, 1, 1], "int8",
               pool_size=[4, 4], stride=[1, 1], padding=[0, 0, 0, 0], ceil_mode=False),
        _layer(8, "fc", "dense", ["gap", "constant_fc_weight"], ["fc_reshape"],
               [[1, 32, 1, 1], [10, 32, 1, 1]], ["int8", "int8"], [1, 10, 1, 1], "float16"),
        _layer(9, "fc_reshape", "reshape", ["fc"], ["output1"], [[1, 10, 1, 1]], ["float16"],
               [1, 10], "float16", device="cpu"),
    ]
    return {layer["name"]: layer for layer in layers}


# -- the corpus networks ------------------------------------------------------------------------

# What each corpus network's Gemini scheduler IR (batch 1, one core, 16 GB/s) holds: the tests
# check planc's readings of it against these counts, network by network.
NETWORK_FACTS = {
    "int8_resnet34": {"workloads": 69, "pe_workloads": 37, "vp_workloads": 32},
    "int8_resnet50": {"workloads": 88, "pe_workloads": 62, "vp_workloads": 26},
}


def network_pairs():
    """(network, layer description, scheduler IR) for every corpus network, as pytest params:
    each schedule with the layer description it was made from (matched by file name)."""
    import pytest

    from tests.conftest import corpus_root

    folder = corpus_root() / "gemini"
    pairs = []
    for schedule in sorted(folder.glob("*_stschedule.json")) if folder.is_dir() else []:
        network = schedule.name.split(".")[0]
        layers = next((p for p in folder.glob(f"{network}.*.json")
                       if not p.name.endswith("_stschedule.json")), None)
        if layers is not None:
            pairs.append(pytest.param(network, layers, schedule, id=network))
    return pairs or [pytest.param(None, None, None, id="no-corpus", marks=pytest.mark.skip(
        reason=f"upstream corpus not found at {folder} (set PLANC_CORPUS to its path)"))]
