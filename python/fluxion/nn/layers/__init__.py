"""All layers of ``fluxion.nn`` (MLX's ``mlx.nn.layers``)."""

from fluxion.nn.layers import activations
from fluxion.nn.layers.activations import *  # noqa: F401,F403
from fluxion.nn.layers.base import Module
from fluxion.nn.layers.containers import Sequential
from fluxion.nn.layers.convolution import Conv1d, Conv2d, Conv3d
from fluxion.nn.layers.convolution_transpose import (
    ConvTranspose1d,
    ConvTranspose2d,
    ConvTranspose3d,
)
from fluxion.nn.layers.distributed import (
    AllToShardedLinear,
    FullyShardedModule,
    QuantizedAllToShardedLinear,
    QuantizedShardedToAllLinear,
    ShardedToAllLinear,
    fully_shard,
    shard_inplace,
    shard_linear,
)
from fluxion.nn.layers.dropout import Dropout, Dropout2d, Dropout3d
from fluxion.nn.layers.embedding import Embedding
from fluxion.nn.layers.linear import Bilinear, Identity, Linear
from fluxion.nn.layers.normalization import (
    BatchNorm,
    GroupNorm,
    InstanceNorm,
    LayerNorm,
    RMSNorm,
)
from fluxion.nn.layers.pooling import (
    AvgPool1d,
    AvgPool2d,
    AvgPool3d,
    MaxPool1d,
    MaxPool2d,
    MaxPool3d,
)
from fluxion.nn.layers.positional_encoding import (
    ALiBi,
    RoPE,
    SinusoidalPositionalEncoding,
)
from fluxion.nn.layers.quantized import (
    QQLinear,
    QuantizedEmbedding,
    QuantizedLinear,
    quantize,
)
from fluxion.nn.layers.recurrent import GRU, LSTM, RNN
from fluxion.nn.layers.transformer import (
    MultiHeadAttention,
    Transformer,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
)
from fluxion.nn.layers.upsample import (
    Upsample,
    upsample_cubic,
    upsample_linear,
    upsample_nearest,
)
