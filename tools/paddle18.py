"""Paddle 1.8's public names, the yardstick of `fluid`'s breadth: each group is one of
Paddle 1.8's ``__all__`` lists (the ``v1.8.5`` tag of the public Paddle repository), with
the `fluid` module where the name belongs here. `tools/gen_docs.py` writes the table of
docs/api.md from it, and tests/test_paddle_names.py checks that every name is present or
has its reason in `LEFT_OUT` or `OUT_OF_SCOPE`.
"""
from __future__ import annotations

#: (title, module of `fluid` the names live in ('' for `fluid` itself), names)
GROUPS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ('fluid.layers (layers/nn.py)', 'layers', (
    'log1p', 'logsumexp', 'clamp', 'addmm', 'addcmul', 'bmm', 'nonzero', 'index_select',
    'dist', 'dot', 't', 'cross', 'interpolate', 'diag_embed', 'meshgrid', 'fc', 'embedding',
    'linear_chain_crf', 'crf_decoding', 'cos_sim', 'chunk_eval', 'conv2d', 'conv3d', 'softmax',
    'pool2d', 'pool3d', 'adaptive_pool2d', 'adaptive_pool3d', 'batch_norm', 'inplace_abn',
    'instance_norm', 'data_norm', 'conv2d_transpose', 'conv3d_transpose', 'reduce_sum',
    'reduce_mean', 'reduce_max', 'reduce_min', 'reduce_prod', 'reduce_all', 'reduce_any',
    'dropout', 'split', 'ctc_greedy_decoder', 'l2_normalize', 'matmul', 'topk', 'transpose',
    'im2sequence', 'row_conv', 'multiplex', 'layer_norm', 'group_norm', 'spectral_norm',
    'smooth_l1', 'one_hot', 'autoincreased_step_counter', 'reshape', 'squeeze', 'unsqueeze',
    'lod_reset', 'lod_append', 'lrn', 'pad', 'pad_constant_like', 'label_smooth', 'roi_pool',
    'roi_align', 'dice_loss', 'image_resize', 'image_resize_short', 'resize_bilinear',
    'resize_trilinear', 'resize_nearest', 'gather', 'gather_nd', 'scatter', 'scatter_nd_add',
    'scatter_nd', 'random_crop', 'mean_iou', 'relu', 'selu', 'log', 'crop', 'crop_tensor',
    'elu', 'relu6', 'pow', 'stanh', 'hard_sigmoid', 'swish', 'prelu', 'brelu', 'leaky_relu',
    'soft_relu', 'flatten', 'stack', 'pad2d', 'unstack', 'unique', 'unique_with_counts',
    'expand', 'expand_as', 'scale', 'elementwise_add', 'elementwise_div', 'elementwise_sub',
    'elementwise_mul', 'elementwise_max', 'elementwise_min', 'elementwise_pow',
    'elementwise_mod', 'elementwise_floordiv', 'uniform_random_batch_size_like',
    'gaussian_random', 'sampling_id', 'gaussian_random_batch_size_like', 'sum', 'slice',
    'strided_slice', 'shape', 'rank', 'size', 'logical_and', 'logical_or', 'logical_xor',
    'logical_not', 'clip', 'clip_by_norm', 'mean', 'mul', 'maxout', 'space_to_depth',
    'affine_grid', 'affine_channel', 'similarity_focus', 'hash', 'grid_sampler', 'log_loss',
    'add_position_encoding', 'bilinear_tensor_product', 'merge_selected_rows',
    'get_tensor_from_selected_rows', 'shuffle_channel', 'temporal_shift', 'py_func',
    'psroi_pool', 'prroi_pool', 'pixel_shuffle', 'fsp_matrix', 'continuous_value_model',
    'where', 'sign', 'deformable_conv', 'unfold', 'deformable_roi_pooling', 'filter_by_instag',
    'shard_index', 'hard_swish', 'mish', 'gather_tree', 'uniform_random', 'randint', 'randn',
    'randperm', 'allclose', 'elementwise_equal', 'flip', 'roll', 'log_softmax', 'index_sample',
    )),
    ('fluid.layers (layers/tensor.py)', 'layers', (
    'create_tensor', 'create_parameter', 'create_global_var', 'cast', 'tensor_array_to_tensor',
    'concat', 'sums', 'assign', 'fill_constant_batch_size_like', 'fill_constant', 'argmin',
    'argmax', 'argsort', 'ones', 'zeros', 'reverse', 'has_inf', 'has_nan', 'isfinite', 'range',
    'linspace', 'full_like', 'zeros_like', 'ones_like', 'diag', 'eye', 'kron', 'arange',
    'full', 'tril', 'triu', 'trace',
    )),
    ('fluid.layers (layers/ops.py)', 'layers', (
    'sigmoid', 'logsigmoid', 'exp', 'tanh', 'atan', 'tanh_shrink', 'sqrt', 'rsqrt', 'abs',
    'ceil', 'floor', 'cos', 'acos', 'asin', 'sin', 'round', 'reciprocal', 'square', 'softplus',
    'softsign', 'softshrink', 'hard_shrink', 'cumsum', 'thresholded_relu', 'gelu', 'erf',
    )),
    ('fluid.layers (layers/loss.py)', 'layers', (
    'center_loss', 'bpr_loss', 'cross_entropy', 'square_error_cost', 'edit_distance',
    'warpctc', 'nce', 'hsigmoid', 'sampled_softmax_with_cross_entropy',
    'softmax_with_cross_entropy', 'rank_loss', 'margin_rank_loss',
    'sigmoid_cross_entropy_with_logits', 'teacher_student_sigmoid_loss', 'huber_loss',
    'kldiv_loss', 'npair_loss', 'mse_loss',
    )),
    ('fluid.layers (layers/control_flow.py)', 'layers', (
    'While', 'Switch', 'increment', 'array_write', 'create_array', 'less_than', 'less_equal',
    'greater_than', 'greater_equal', 'equal', 'not_equal', 'array_read', 'array_length',
    'cond', 'IfElse', 'DynamicRNN', 'StaticRNN', 'reorder_lod_tensor_by_rank', 'Print',
    'is_empty', 'case', 'switch_case', 'while_loop',
    )),
    ('fluid.layers (layers/sequence_lod.py)', 'layers', (
    'sequence_conv', 'sequence_softmax', 'sequence_pool', 'sequence_concat',
    'sequence_first_step', 'sequence_last_step', 'sequence_slice', 'sequence_expand',
    'sequence_expand_as', 'sequence_pad', 'sequence_unpad', 'sequence_reshape',
    'sequence_scatter', 'sequence_enumerate', 'sequence_mask', 'sequence_reverse',
    )),
    ('fluid.layers (layers/rnn.py)', 'layers', (
    'RNNCell', 'GRUCell', 'LSTMCell', 'Decoder', 'BeamSearchDecoder', 'rnn', 'dynamic_decode',
    'DecodeHelper', 'TrainingHelper', 'GreedyEmbeddingHelper', 'SampleEmbeddingHelper',
    'BasicDecoder', 'dynamic_lstm', 'dynamic_lstmp', 'dynamic_gru', 'gru_unit', 'lstm_unit',
    'lstm', 'beam_search', 'beam_search_decode',
    )),
    ('fluid.layers (layers/metric_op.py)', 'layers', (
    'accuracy', 'auc',
    )),
    ('fluid.layers (layers/learning_rate_scheduler.py)', 'layers', (
    'exponential_decay', 'natural_exp_decay', 'inverse_time_decay', 'polynomial_decay',
    'piecewise_decay', 'noam_decay', 'cosine_decay', 'linear_lr_warmup',
    )),
    ('fluid.layers (layers/io.py)', 'layers', (
    'data', 'read_file', 'double_buffer', 'py_reader', 'create_py_reader_by_data', 'load',
    )),
    ('fluid.optimizer', 'optimizer', (
    'SGD', 'Momentum', 'Adagrad', 'Adam', 'Adamax', 'Dpsgd', 'DecayedAdagrad', 'Ftrl',
    'SGDOptimizer', 'MomentumOptimizer', 'AdagradOptimizer', 'AdamOptimizer',
    'AdamaxOptimizer', 'DpsgdOptimizer', 'DecayedAdagradOptimizer', 'RMSPropOptimizer',
    'FtrlOptimizer', 'Adadelta', 'AdadeltaOptimizer', 'ModelAverage', 'LarsMomentum',
    'LarsMomentumOptimizer', 'DGCMomentumOptimizer', 'LambOptimizer',
    'ExponentialMovingAverage', 'PipelineOptimizer', 'LookaheadOptimizer',
    'RecomputeOptimizer',
    )),
    ('fluid.clip', 'clip', (
    'set_gradient_clip', 'ErrorClipByValue', 'GradientClipByValue', 'GradientClipByNorm',
    'GradientClipByGlobalNorm',
    )),
    ('fluid.metrics', 'metrics', (
    'MetricBase', 'CompositeMetric', 'Precision', 'Recall', 'Accuracy', 'ChunkEvaluator',
    'EditDistance', 'DetectionMAP', 'Auc',
    )),
    ('fluid.nets', 'nets', (
    'simple_img_conv_pool', 'sequence_conv_pool', 'glu', 'scaled_dot_product_attention',
    'img_conv_group',
    )),
    ('fluid (input.py)', '', (
    'one_hot', 'embedding',
    )),
    ('fluid.initializer', 'initializer', (
    'Constant', 'Uniform', 'Normal', 'TruncatedNormal', 'Xavier', 'Bilinear', 'MSRA',
    'ConstantInitializer', 'UniformInitializer', 'NormalInitializer',
    'TruncatedNormalInitializer', 'XavierInitializer', 'BilinearInitializer',
    'MSRAInitializer', 'NumpyArrayInitializer',
    )),
    ('fluid.regularizer', 'regularizer', (
    'L1Decay', 'L2Decay', 'L1DecayRegularizer', 'L2DecayRegularizer',
    )),)

#: Names outside the breadth work: what they are about means nothing over padded batches
#: in one process, or belongs to reader plumbing that `fluid.batch_reader` replaces.
OUT_OF_SCOPE: dict[str, str] = {
    "lod_reset": "LoD-only: a padded batch carries its lengths as a tensor, set directly",
    "lod_append": "LoD-only: a padded batch carries its lengths as a tensor, set directly",
    "reorder_lod_tensor_by_rank": "LoD-only: DynamicRNN here runs padded batches in their "
                                  "own order, with lengths",
    "read_file": "reader plumbing: `fluid.batch_reader(...).next_item()` reads a batch",
    "double_buffer": "reader plumbing: `fluid.batch_reader` prefetches in a background "
                     "thread",
    "py_reader": "reader plumbing: `fluid.batch_reader(data=...)` or method arguments feed "
                 "Python data",
    "create_py_reader_by_data": "reader plumbing: method arguments feed data vars",
    "load": "reader plumbing: `fluid.load(path)` loads a whole checkpoint",
}

#: In-scope names that are not here yet, each with its reason.
LEFT_OUT: dict[str, str] = {
    "DGCMomentumOptimizer": "deep gradient compression sparsifies the gradients GPUs "
                            "exchange in collective (all-reduce) multi-GPU training, which "
                            "fluid does not do: its distributed training goes through "
                            "parameter servers",
    "PipelineOptimizer": "pipeline parallelism: the layers split into stages on several "
                         "devices, micro-batches streamed through them; fluid runs each "
                         "program on one device",
    "DetectionMAP": "the mean average precision of object detection needs the detection "
                    "ops (multiclass_nms, detection_map), which fluid does not have",
}
