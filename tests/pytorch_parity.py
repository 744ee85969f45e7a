"""PyTorch parity check for Scratchformer checkpoints (docs/05-transformer.md).

Usage: python3 pytorch_parity.py DIR

DIR holds model.safetensors (our weights, F32 or a BF16 export, hyperparameters
in __metadata__) and batch.safetensors: src, tgt (int32 token ids) and either
logprobs (our float32 output in eval mode), or labels (int32, [PAD] where no
token is scored) and nll (what our `score` printed for each row), or labels and
loss_bf16 (our training loss, label smoothing 0.1, under a bf16 autocast), which
is compared with the loss PyTorch computes under
torch.autocast("cpu", dtype=torch.bfloat16) to 1e-2 relative, and with PyTorch's
loss from products of the same bf16-rounded operands (RoundedOperands) to
AUTOCAST_SAME_TOLERANCE, nearer than to the float32 loss; and optionally loss_f32
(ours in float32), compared with PyTorch's float32 loss to 1e-4. This script
builds the same Transformer in PyTorch (the maths of docs/04-layers.md, the
state_dict names of docs/05-transformer.md) in the file's dtype, loads our
weights with load_state_dict(strict=True), casts the model to float32, as our
loading widens a bf16 file, and recomputes the log-probabilities with the same
masks. Exit status 0 when they agree (log-probs to 1e-4, NLLs to 1e-5
relative), 1 otherwise.
"""
import json
import math
import struct
import sys

import torch
import torch.nn as nn
from torch.overrides import TorchFunctionMode

PAD = 1
TOLERANCE = 1e-4
NLL_TOLERANCE = 1e-5  # relative, plus that much absolute for the 6 decimals `score` prints
AUTOCAST_TOLERANCE = 1e-2  # relative: PyTorch also runs layer norm and softmax on bf16 activations
# Relative, against RoundedOperands: an ulp's difference in a float32 sum (our
# GEMM's order against PyTorch's) can flip a later operand's rounding to bf16,
# by 2^-9 of it, so the same rounding gives losses equal to about 1e-5 only;
# bf16 moves the loss about ten times as far from float32's (2e-4 here).
AUTOCAST_SAME_TOLERANCE = 3e-5
LABEL_SMOOTHING = 0.1


def read_safetensors(path):
    """(tensors in file order, metadata), parsed by hand: the safetensors
    package may be absent."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    metadata = header.pop("__metadata__", {})
    dtypes = {"F32": torch.float32, "I32": torch.int32, "BF16": torch.bfloat16}
    data = bytearray(blob[8 + n:])  # writable, as torch.frombuffer wants
    tensors = {}
    for name, entry in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        begin, end = entry["data_offsets"]
        dtype = dtypes[entry["dtype"]]
        size = torch.empty(0, dtype=dtype).element_size()
        flat = torch.frombuffer(data, dtype=dtype, count=(end - begin) // size,
                                offset=begin) if end > begin else torch.empty(0, dtype=dtype)
        tensors[name] = flat.reshape(entry["shape"]).clone()
    return tensors, metadata


# --- the reference model (docs/05-transformer.md names, docs/04-layers.md maths) ---

class InputEmbeddings(nn.Module):
    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.d_model = d_model
        self.embedding = nn.Embedding(vocab_size, d_model)

    def forward(self, x):
        return self.embedding(x) * math.sqrt(self.d_model)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, seq_len, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(seq_len, d_model)
        position = torch.arange(0, seq_len, dtype=torch.float).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe.unsqueeze(0))

    def forward(self, x):
        return self.dropout(x + self.pe[:, :x.shape[1], :])


class LayerNormalization(nn.Module):
    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.alpha = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x):
        mean = x.mean(dim=-1, keepdim=True)
        std = x.std(dim=-1, keepdim=True)  # unbiased
        return self.alpha * (x - mean) / (std + self.eps) + self.bias


class FeedForwardBlock(nn.Module):
    def __init__(self, d_model, d_ff, dropout):
        super().__init__()
        self.linear_1 = nn.Linear(d_model, d_ff)
        self.dropout = nn.Dropout(dropout)
        self.linear_2 = nn.Linear(d_ff, d_model)

    def forward(self, x):
        return self.linear_2(self.dropout(torch.relu(self.linear_1(x))))


class MultiHeadAttentionBlock(nn.Module):
    def __init__(self, d_model, h, dropout):
        super().__init__()
        self.h = h
        self.d_k = d_model // h
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)
        self.dropout = nn.Dropout(dropout)

    def forward(self, q, k, v, mask):
        def heads(x):
            return x.view(x.shape[0], x.shape[1], self.h, self.d_k).transpose(1, 2)

        query, key, value = heads(self.w_q(q)), heads(self.w_k(k)), heads(self.w_v(v))
        scores = (query @ key.transpose(-2, -1)) / math.sqrt(self.d_k)
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        weights = self.dropout(scores.softmax(dim=-1))
        x = (weights @ value).transpose(1, 2).contiguous().view(q.shape[0], -1, self.h * self.d_k)
        return self.w_o(x)


class ResidualConnection(nn.Module):
    def __init__(self, features, dropout):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.norm = LayerNormalization(features)

    def forward(self, x, sublayer):
        return x + self.dropout(sublayer(self.norm(x)))


class EncoderBlock(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout):
        super().__init__()
        self.self_attention_block = MultiHeadAttentionBlock(d_model, h, dropout)
        self.feed_forward_block = FeedForwardBlock(d_model, d_ff, dropout)
        self.residual_connections = nn.ModuleList([ResidualConnection(d_model, dropout) for _ in range(2)])

    def forward(self, x, src_mask):
        x = self.residual_connections[0](x, lambda x: self.self_attention_block(x, x, x, src_mask))
        return self.residual_connections[1](x, self.feed_forward_block)


class DecoderBlock(nn.Module):
    def __init__(self, d_model, h, d_ff, dropout):
        super().__init__()
        self.self_attention_block = MultiHeadAttentionBlock(d_model, h, dropout)
        self.cross_attention_block = MultiHeadAttentionBlock(d_model, h, dropout)
        self.feed_forward_block = FeedForwardBlock(d_model, d_ff, dropout)
        self.residual_connections = nn.ModuleList([ResidualConnection(d_model, dropout) for _ in range(3)])

    def forward(self, x, memory, src_mask, tgt_mask):
        x = self.residual_connections[0](x, lambda x: self.self_attention_block(x, x, x, tgt_mask))
        x = self.residual_connections[1](x, lambda x: self.cross_attention_block(x, memory, memory, src_mask))
        return self.residual_connections[2](x, self.feed_forward_block)


class Stack(nn.Module):
    """Encoder or Decoder: the layers, then a final norm."""

    def __init__(self, d_model, layers):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = LayerNormalization(d_model)

    def forward(self, x, *args):
        for layer in self.layers:
            x = layer(x, *args)
        return self.norm(x)


class ProjectionLayer(nn.Module):
    def __init__(self, d_model, vocab_size):
        super().__init__()
        self.proj = nn.Linear(d_model, vocab_size)

    def forward(self, x):
        return torch.log_softmax(self.proj(x), dim=-1)


class Transformer(nn.Module):
    def __init__(self, src_vocab, tgt_vocab, src_seq_len, tgt_seq_len, d_model, N, h, d_ff, dropout=0.1):
        super().__init__()
        self.encoder = Stack(d_model, [EncoderBlock(d_model, h, d_ff, dropout) for _ in range(N)])
        self.decoder = Stack(d_model, [DecoderBlock(d_model, h, d_ff, dropout) for _ in range(N)])
        self.src_embed = InputEmbeddings(d_model, src_vocab)
        self.tgt_embed = InputEmbeddings(d_model, tgt_vocab)
        self.src_pos = PositionalEncoding(d_model, src_seq_len, dropout)
        self.tgt_pos = PositionalEncoding(d_model, tgt_seq_len, dropout)
        self.projection_layer = ProjectionLayer(d_model, tgt_vocab)

    def encode(self, src, src_mask):
        return self.encoder(self.src_pos(self.src_embed(src)), src_mask)

    def decode(self, memory, src_mask, tgt, tgt_mask):
        return self.decoder(self.tgt_pos(self.tgt_embed(tgt)), memory, src_mask, tgt_mask)

    def project(self, x):
        return self.projection_layer(x)


def causal_mask(size):
    return torch.triu(torch.ones((1, size, size)), diagonal=1).type(torch.int) == 0


def load_model(path):
    """The reference model holding the file's weights, in float32, or None
    (after saying why) when the file does not load as a state dict should."""
    weights, meta = read_safetensors(path)
    src_seq_len = int(meta.get("src_seq_len", meta.get("seq_len")))
    tgt_seq_len = int(meta.get("tgt_seq_len", meta.get("seq_len")))
    model = Transformer(int(meta["src_vocab_size"]), int(meta["tgt_vocab_size"]), src_seq_len, tgt_seq_len,
                        int(meta["d_model"]), int(meta["N"]), int(meta["h"]), int(meta["d_ff"]))
    dtypes = {t.dtype for t in weights.values()}
    if len(dtypes) != 1:
        print(f"pytorch parity: the weights mix dtypes {sorted(map(str, dtypes))}")
        return None
    # Built in the file's dtype, so that the strict load copies the values
    # without converting them.
    (dtype,) = dtypes
    model.to(dtype).load_state_dict(weights, strict=True)
    if list(model.state_dict().keys()) != list(weights.keys()):
        print("pytorch parity: the file's tensor order differs from PyTorch's state_dict order")
        return None
    print(f"pytorch parity (torch {torch.__version__}): {len(weights)} {dtype} tensors loaded strict")
    return model.float().eval()


def compare_logprobs(logprobs, ours):
    if logprobs.shape != ours.shape:
        print(f"pytorch parity: shapes differ: PyTorch {list(logprobs.shape)}, ours {list(ours.shape)}")
        return False
    diff = (logprobs - ours).abs().max().item()
    verdict = "ok" if diff <= TOLERANCE else "MISMATCH"
    print(f"pytorch parity: {ours.numel()} log-probs, max |diff| = {diff:.3g} (tolerance {TOLERANCE:g}): {verdict}")
    return diff <= TOLERANCE


def compare_nll(logprobs, labels, ours):
    """Each row's -sum log p of its labels (teacher forcing) against `score`'s."""
    picked = logprobs.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    nll = -(picked * (labels != PAD)).sum(dim=-1).double()
    ours = ours.double()
    diff = (nll - ours).abs() / (ours.abs() + 1)
    verdict = "ok" if diff.max().item() <= NLL_TOLERANCE else "MISMATCH"
    print(f"pytorch parity: {ours.numel()} NLLs ({', '.join(f'{v:.4f}' for v in nll.tolist())}), "
          f"max |diff|/(|nll|+1) = {diff.max().item():.3g} (tolerance {NLL_TOLERANCE:g}): {verdict}")
    return verdict == "ok"


class RoundedOperands(TorchFunctionMode):
    """Our autocast's definition of a product, in PyTorch: F.linear and matmul
    take their float32 operands rounded to bf16 (the bias is added in float32)
    and return float32. torch.autocast's products return bf16: it rounds their
    results too, and that rounding moves the loss as far as the operands' does,
    so torch.autocast's loss is no nearer to ours than the float32 one is."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in (nn.functional.linear, torch.matmul, torch.Tensor.matmul, torch.Tensor.__matmul__):
            args = tuple(a.bfloat16().float() if i < 2 and isinstance(a, torch.Tensor) and a.dtype == torch.float32
                         else a for i, a in enumerate(args))
        return func(*args, **(kwargs or {}))


def compare_autocast_loss(model, src, tgt, src_mask, tgt_mask, labels, ours, ours_f32):
    """The training loss under PyTorch's CPU autocast in bf16 against ours
    under our bf16 autocast, to AUTOCAST_TOLERANCE relative. Within 1e-2 alone,
    a float32 loss (an autocast that rounded nothing) passes too, and
    torch.autocast's loss is no nearer to ours than float32's is (it rounds the
    products' results as well, see RoundedOperands): so ours is also held to
    PyTorch's loss with the products' operands rounded as ours rounds them, to
    AUTOCAST_SAME_TOLERANCE, and must be nearer to it than to the float32 loss.
    `ours_f32` (our float32 loss, or None) must be PyTorch's float32 loss to
    TOLERANCE, so that the differences measured are the rounding's alone."""
    def loss():
        logprobs = model.project(model.decode(model.encode(src, src_mask), src_mask, tgt, tgt_mask))
        return nn.functional.cross_entropy(logprobs.float().flatten(0, 1), labels.flatten(), ignore_index=PAD,
                                           label_smoothing=LABEL_SMOOTHING).item()
    with torch.no_grad():
        f32 = loss()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            bf16 = loss()
        with RoundedOperands():
            rounded = loss()
    ours = ours.item()
    checks = []

    def check(name, ok, line):
        checks.append(ok)
        print(f"pytorch autocast parity: {name}: {line}: {'ok' if ok else 'MISMATCH'}")

    diff = abs(ours - bf16) / abs(bf16)
    check("torch.autocast", diff <= AUTOCAST_TOLERANCE,
          f"loss in bf16 ours {ours:.7f}, PyTorch's autocast {bf16:.7f} (float32 {f32:.7f}, |ours - autocast| "
          f"{abs(ours - bf16):.3g}, |ours - float32| {abs(ours - f32):.3g}); relative difference {diff:.3g} "
          f"(tolerance {AUTOCAST_TOLERANCE:g})")
    same = abs(ours - rounded) / abs(rounded)
    nearer = abs(ours - rounded) < abs(ours - f32)
    check("rounded operands", same <= AUTOCAST_SAME_TOLERANCE and nearer,
          f"PyTorch's products on bf16-rounded operands {rounded:.7f}; relative difference {same:.3g} (tolerance "
          f"{AUTOCAST_SAME_TOLERANCE:g}); |ours - rounded| {abs(ours - rounded):.3g} {'<' if nearer else '>='} "
          f"|ours - float32| {abs(ours - f32):.3g}")
    if ours_f32 is not None:
        ours_f32 = ours_f32.item()
        f32_diff = abs(ours_f32 - f32) / abs(f32)
        check("float32", f32_diff <= TOLERANCE, f"loss ours {ours_f32:.7f}, PyTorch's {f32:.7f}; relative difference "
              f"{f32_diff:.3g} (tolerance {TOLERANCE:g})")
    return all(checks)


def main():
    folder = sys.argv[1]
    model = load_model(f"{folder}/model.safetensors")
    if model is None:
        return 1
    batch, _ = read_safetensors(f"{folder}/batch.safetensors")
    src, tgt = batch["src"].long(), batch["tgt"].long()
    # The masks (1 = keep): [B, 1, 1, S] not-pad; [B, 1, T, T] not-pad & causal.
    src_mask = (src != PAD).unsqueeze(1).unsqueeze(1).int()
    tgt_mask = (tgt != PAD).unsqueeze(1).unsqueeze(1).int() & causal_mask(tgt.shape[1]).unsqueeze(0)
    if "loss_bf16" in batch:
        return 0 if compare_autocast_loss(model, src, tgt, src_mask, tgt_mask, batch["labels"].long(),
                                          batch["loss_bf16"], batch.get("loss_f32")) else 1
    with torch.no_grad():
        memory = model.encode(src, src_mask)
        logprobs = model.project(model.decode(memory, src_mask, tgt, tgt_mask))
    if "logprobs" in batch:
        return 0 if compare_logprobs(logprobs, batch["logprobs"]) else 1
    return 0 if compare_nll(logprobs, batch["labels"].long(), batch["nll"]) else 1


if __name__ == "__main__":
    sys.exit(main())
