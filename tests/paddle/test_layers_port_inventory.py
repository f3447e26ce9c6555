"""Every case of Paddle 1.8's test_layers.py is ported or listed with its reason, and the
counts docs/paddle_tests.md gives are the counts here."""
import os
import re

from paddle import test_layers_port_book as book
from paddle import test_layers_port_book_tests as book_tests
from paddle import test_layers_port_layer as layer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: test_layers.py's cases at Paddle's v1.8.5 tag: TestLayer's test_* methods, TestBook's
#: make_* methods (which its test_all_layers runs) and TestBook's other test_* methods.
PADDLE_TEST_LAYER = (
    "custom_layer_with_kwargs", "dropout", "linear", "layer_norm", "relu", "matmul", "conv2d",
    "gru_unit", "elementwise_math", "elementwise_minmax", "sequence_conv", "conv2d_transpose",
    "bilinear_tensor_product", "prelu", "embeding", "nce", "one_hot", "split", "topk", "conv3d",
    "row_conv", "group_norm", "spectral_norm", "tree_conv", "conv3d_transpose", "eye_op",
    "hard_swish", "while_loop", "compare", "cond", "case", "switch_case", "crop_tensor",
    "shard_index", "accuracy",
)
PADDLE_MAKE = (
    "sampled_softmax_with_cross_entropy", "fit_a_line", "recognize_digits_mlp",
    "conv2d_transpose", "recognize_digits_conv", "word_embedding", "sigmoid_cross_entropy",
    "hsigmoid", "pool2d", "pool2d_infershape", "pool3d", "adaptive_pool2d", "adaptive_pool3d",
    "lstm_unit", "softmax", "space_to_depth", "lrn", "get_places", "nce", "multiplex",
    "softmax_with_cross_entropy", "smooth_l1", "scatter", "one_hot", "label_smooth", "topk",
    "resize_bilinear", "resize_bilinear_by_scale", "resize_nearest", "resize_nearest_by_scale",
    "resize_trilinear", "resize_trilinear_by_scale", "polygon_box_transform", "l2_normalize",
    "maxout", "crop", "mean_iou", "argsort", "rank_loss", "shape", "pad2d", "prelu", "brelu",
    "leaky_relu", "soft_relu", "sigmoid", "logsigmoid", "exp", "tanh", "tanh_shrink", "sqrt",
    "abs", "ceil", "floor", "cos", "sin", "round", "reciprocal", "square", "softplus",
    "softsign", "mish", "cross_entropy", "bpr_loss", "expand", "uniform_random_batch_size_like",
    "gaussian_random", "sampling_id", "gaussian_random_batch_size_like", "sum", "slice",
    "scale_variable", "softshrink", "iou_similarity", "grid_sampler",
    "bilinear_tensor_product_layer", "batch_norm", "batch_norm_momentum_variable",
    "inplace_abn", "inplace_abn_momentum_variable", "range", "spectral_norm", "kldiv_loss",
    "temporal_shift", "shuffle_channel", "fsp_matrix", "pixel_shuffle", "mse_loss",
    "square_error_cost",
)
PADDLE_BOOK_TESTS = (
    "dynamic_lstmp", "linear_chain_crf", "linear_chain_crf_padding", "im2sequence", "lod_reset",
    "affine_grid", "stridedslice", "fill_constant_batch_size_like", "psroi_pool",
    "sequence_expand", "sequence_reshape", "sequence_unpad", "sequence_softmax",
    "sequence_unsqueeze", "sequence_scatter", "sequence_slice", "filter_by_instag",
    "shuffle_batch", "partial_sum", "rank_attention", "roi_pool", "sequence_enumerate",
    "roi_align", "roi_perspective_transform", "row_conv", "simple_conv2d", "squeeze", "flatten",
    "linspace", "deformable_conv", "deformable_conv2", "unfold", "partial_concat",
    "deform_roi_pooling", "deformable_conv_v1", "retinanet_target_assign", "sigmoid_focal_loss",
    "addmm", "retinanet_detection_output", "warpctc_with_padding", "edit_distance", "basic_gru",
)


def _layer_ported():
    return {n for n in dir(layer) if n.startswith("test_")}


def test_every_case_is_ported_or_has_its_reason():
    groups = [
        (["test_" + n for n in PADDLE_TEST_LAYER], _layer_ported(), layer.OUT_OF_SCOPE),
        (["make_" + n for n in PADDLE_MAKE], set(book.CASES), book.OUT_OF_SCOPE),
        (["test_" + n for n in PADDLE_BOOK_TESTS], set(book_tests.CASES),
         book_tests.OUT_OF_SCOPE),
    ]
    for names, ported, left in groups:
        assert len(set(names)) == len(names)
        assert not ported & set(left), ported & set(left)
        assert set(names) == ported | set(left), set(names) ^ (ported | set(left))
    assert sum(len(names) for names, _, _ in groups) == 166


def test_the_docs_table_counts_what_is_here():
    with open(os.path.join(ROOT, "docs", "paddle_tests.md")) as f:
        text = f.read()
    section = text[text.index("## test_layers.py"):]
    ported = len(_layer_ported()) + len(book.CASES) + len(book_tests.CASES)
    left = len(layer.OUT_OF_SCOPE) + len(book.OUT_OF_SCOPE) + len(book_tests.OUT_OF_SCOPE)
    refused = len(book_tests.REFUSED)
    numbers = re.search(r"(\d+) cases: (\d+) ported, (\d+) out of scope; of the ported, "
                        r"(\d+) pass", section)
    assert numbers, "the section states the counts"
    assert [int(g) for g in numbers.groups()] == [166, ported, left, ported - refused]
    for name in list(layer.OUT_OF_SCOPE) + list(book.OUT_OF_SCOPE) + \
            list(book_tests.OUT_OF_SCOPE) + list(book_tests.REFUSED):
        assert f"`{name}`" in section, f"docs/paddle_tests.md does not list {name}"
