#!/usr/bin/env python3
"""clpa-demo --model on a GGUF file this test writes itself: a tiny Llama
(2 layers, hidden 64, 2/1 heads of 32, f32, f16 and bf16 tensors) with a
SentencePiece tokenizer (byte fallback), in GGUF v3. The demo must serve a
text prompt and print its answer, pass --check against the host reference
(which reads the same weights), serve the synthetic workload on it, and
refuse a truncated file, a non-llama architecture or one holding a NUL
byte with a message naming the problem, and fail (exit 1) a prompt that
does not fit the model's context, saying both lengths. The same with
quantized weight matrices (issue 42): Q8_0 / Q4_0 (encoded here, as
ggml's reference quantizers do) and, on a hidden-256 model, Q4_K / Q5_K /
Q6_K (valid blocks of random bits); a K-quant row that is not whole
256-element blocks and a q4_1 tensor are refused, naming tensor and type.
Linear RoPE scaling (llama.rope.scaling.*) answers as the same factor in
rope_freqs.weight does; YaRN is refused.

--prompts serves a file through continuous batching: plain text and JSON
lines give, in the file's order, the answers each prompt gets alone with
--prompt (greedy), refused requests in their place with the reason, the
summary on stderr; malformed lines are refused with FILE:LINE:COLUMN (exit
2). Sampling repeats under one seed whatever the batching, changes with
the seed, and top-k 1 is greedy; --check refuses it.

Against an implementation not the demo's: a Llama with GQA made in Hugging
Face's layout, written as llama.cpp's convert_hf_to_gguf.py writes it (Q
and K rows permuted per head), run in NumPy from transformers'
modeling_llama (rotate_half RoPE, repeat_kv) in float64; the demo's greedy
tokens must be NumPy's, with an LM head and with tied embeddings. TAP
output.

usage: test_demo_gguf_model.py CLPA_DEMO"""
import json
import os
import random
import re
import struct
import sys
import tempfile
try:
    import numpy as np
except ImportError:
    np = None
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tap import done, ok, run_child  # noqa: E402

demo = sys.argv[1]


# GGUF value types and ggml tensor types used here.
U32, I32, F32, STR, ARR = 4, 5, 6, 8, 9
T_F32, T_F16, T_BF16 = 0, 1, 30
T_Q4_1, T_Q4_0, T_Q8_0, T_Q4_K, T_Q5_K, T_Q6_K = 3, 2, 8, 12, 13, 14
BLOCK_BYTES = {T_Q4_1: (32, 20), T_Q4_0: (32, 18), T_Q8_0: (32, 34), T_Q4_K: (256, 144), T_Q5_K: (256, 176),
               T_Q6_K: (256, 210)}


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, val):
    out = gstr(key) + struct.pack("<I", typ)
    if typ == U32:
        out += struct.pack("<I", val)
    elif typ == I32:
        out += struct.pack("<i", val)
    elif typ == F32:
        out += struct.pack("<f", val)
    elif typ == STR:
        out += gstr(val)
    elif typ == ARR:
        et, items = val
        out += struct.pack("<IQ", et, len(items))
        for it in items:
            out += gstr(it) if et == STR else struct.pack("<f" if et == F32 else "<i", it)
    return out


def f16_bits(x):
    return struct.unpack("<H", struct.pack("<e", x))[0]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def q8_0(vals):
    """ggml's quantize_row_q8_0_ref: per 32, d = max|x| / 127 as f16, q = round(x / d)."""
    out = b""
    for i in range(0, len(vals), 32):
        blk = vals[i:i + 32]
        d = f16(max(abs(v) for v in blk) / 127)
        out += struct.pack("<e32b", d, *[max(-127, min(127, round(v / d))) if d else 0 for v in blk])
    return out


def q4_0(vals):
    """ggml's quantize_row_q4_0_ref: d = -v / 8 for v the element of largest magnitude, q = x / d + 8 in
    [0, 15]; element j in byte j's low nibble, element j + 16 in its high nibble."""
    out = b""
    for i in range(0, len(vals), 32):
        blk = vals[i:i + 32]
        d = f16(max(blk, key=abs) / -8)
        q = [max(0, min(15, int(v / d + 8.5))) if d else 8 for v in blk]
        out += struct.pack("<e", d) + bytes(q[j] | q[j + 16] << 4 for j in range(16))
    return out


def k_random(rng, n, typ, scale):
    """n elements of valid K-quant blocks of random bits, scaled so that values spread over about
    [-scale, scale] around 0 (test_demo_quant checks decoding; here the model serves what they hold)."""
    out = b""
    for _ in range(n // 256):
        if typ == T_Q6_K:  # y = d * sc * (q - 32): |y| <= 4096 d
            out += bytes(rng.getrandbits(8) for _ in range(208)) + struct.pack("<e", scale / 4096)
        else:  # y = d * sc * q - dmin * m: mean 0 with these d, dmin
            levels = 15 if typ == T_Q4_K else 31
            out += struct.pack("<ee", 2 * scale / (63 * levels), scale / 63)
            out += bytes(rng.getrandbits(8) for _ in range(BLOCK_BYTES[typ][1] - 4))
    return out


def tensor_bytes(vals, typ):
    if isinstance(vals, bytes):
        return vals
    if typ == T_Q8_0:
        return q8_0(vals)
    if typ == T_Q4_0:
        return q4_0(vals)
    if typ == T_F32:
        return struct.pack("<%df" % len(vals), *vals)
    if typ == T_F16:
        return struct.pack("<%dH" % len(vals), *[f16_bits(v) for v in vals])
    # bf16: the top half of the f32 bits (truncation is a valid bf16 value)
    return struct.pack("<%dH" % len(vals), *[struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in vals])


# The tokenizer of every file here: SentencePiece (llama.cpp's "llama" model) with byte fallback.
# Only whole words are longer than one character, and no pair of characters is a token, so
# text of these letters and spaces is one token a character (tokenize() below).
WORDS = ["\u2581the", "\u2581a", "\u2581cat", "\u2581sat", "\u2581on", "\u2581mat", "\u2581hello",
         "\u2581world", "\u2581", "e", "t", "a", "o", "n", "s", "h", "l", "r", "d", "w", "c", "m"]
PIECES = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)] + WORDS
TOKEN_TYPES = [2, 3, 3] + [6] * 256 + [1] * len(WORDS)  # unknown, control, byte, normal
BOS, EOS = 1, 2


def tokenizer_meta():
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(WORDS))]
    return [kv("tokenizer.ggml.model", STR, "llama"),
            kv("tokenizer.ggml.tokens", ARR, (STR, PIECES)), kv("tokenizer.ggml.scores", ARR, (F32, scores)),
            kv("tokenizer.ggml.token_type", ARR, (I32, TOKEN_TYPES)),
            kv("tokenizer.ggml.bos_token_id", U32, BOS), kv("tokenizer.ggml.eos_token_id", U32, EOS)]


def write_gguf(path, arch="llama", context=512, quant=None, odd=None, more_meta=(),
               more_tensors=()):
    """quant: None (f32/f16/bf16), "legacy" (Q8_0 / Q4_0 matrices) or "k" (Q4_K / Q5_K / Q6_K matrices, hidden
    256); odd: (tensor name, ggml type) written with random bytes of that type's size instead;
    more_meta: (key, type, value) added; more_tensors: (name, dims, f32 values) added."""
    rng = random.Random(7)
    hidden, layers, heads, kv_heads, hd, ffn = 64, 2, 2, 1, 32, 128
    if quant == "k":
        hidden, hd, ffn = 256, 128, 256
    vocab = len(PIECES)
    meta = [kv("general.architecture", STR, arch), kv("llama.embedding_length", U32, hidden),
            kv("llama.block_count", U32, layers), kv("llama.attention.head_count", U32, heads),
            kv("llama.attention.head_count_kv", U32, kv_heads), kv("llama.feed_forward_length", U32, ffn),
            kv("llama.context_length", U32, context), kv("llama.rope.freq_base", F32, 10000.0),
            kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5)] + tokenizer_meta()
    meta += [kv(*m) for m in more_meta]

    # each matrix's type: plain, then with quant="legacy", then with quant="k"
    kinds = {"token_embd": (T_F32, T_Q8_0, T_Q6_K), "output": (T_F16, T_Q4_0, T_Q6_K),
             "attn_q": (T_F16, T_Q8_0, T_Q4_K), "attn_k": (T_BF16, T_Q4_0, T_Q4_K),
             "attn_v": (T_F32, T_Q8_0, T_Q6_K), "attn_output": (T_F32, T_Q4_0, T_Q4_K),
             "ffn_gate": (T_F16, T_Q8_0, T_Q4_K), "ffn_up": (T_F32, T_Q4_0, T_Q5_K), "ffn_down": (T_F32, T_Q8_0, T_Q6_K)}

    def mat(kind, rows, cols, scale):
        typ = kinds[kind][(None, "legacy", "k").index(quant)]
        if typ in (T_Q4_K, T_Q5_K, T_Q6_K):
            return k_random(rng, rows * cols, typ, scale), typ
        return [rng.uniform(-1, 1) * scale for _ in range(rows * cols)], typ

    tensors = [("token_embd.weight", [hidden, vocab], *mat("token_embd", vocab, hidden, 1.0)),
               ("output_norm.weight", [hidden], [1.0 + rng.uniform(-0.1, 0.1) for _ in range(hidden)], T_F32),
               ("output.weight", [hidden, vocab], *mat("output", vocab, hidden, 3.0 / hidden ** 0.5))]
    for l in range(layers):
        p = "blk.%d." % l
        tensors += [(p + "attn_norm.weight", [hidden], [1.0] * hidden, T_F32),
                    (p + "attn_q.weight", [hidden, heads * hd], *mat("attn_q", heads * hd, hidden, hidden ** -0.5)),
                    (p + "attn_k.weight", [hidden, kv_heads * hd], *mat("attn_k", kv_heads * hd, hidden, hidden ** -0.5)),
                    (p + "attn_v.weight", [hidden, kv_heads * hd], *mat("attn_v", kv_heads * hd, hidden, hidden ** -0.5)),
                    (p + "attn_output.weight", [heads * hd, hidden],
                     *mat("attn_output", hidden, heads * hd, (heads * hd) ** -0.5)),
                    (p + "ffn_norm.weight", [hidden], [1.0] * hidden, T_F32),
                    (p + "ffn_gate.weight", [hidden, ffn], *mat("ffn_gate", ffn, hidden, hidden ** -0.5)),
                    (p + "ffn_up.weight", [hidden, ffn], *mat("ffn_up", ffn, hidden, hidden ** -0.5)),
                    (p + "ffn_down.weight", [ffn, hidden], *mat("ffn_down", hidden, ffn, ffn ** -0.5))]
    tensors += [(name, dims, vals, T_F32) for name, dims, vals in more_tensors]
    if odd:
        for i, (name, dims, vals, typ) in enumerate(tensors):
            if name == odd[0]:
                n = dims[0] * (dims[1] if len(dims) > 1 else 1)
                elems, nbytes = BLOCK_BYTES[odd[1]]
                tensors[i] = (name, dims, bytes(rng.getrandbits(8) for _ in range(-(-n // elems) * nbytes)), odd[1])
    write_file(path, meta, tensors)


def write_file(path, meta, tensors):
    """A GGUF v3 file: meta, kv() items; tensors, (name, ggml dims, values, ggml type)."""
    infos, data = b"", b""
    for name, dims, vals, typ in tensors:
        while len(data) % 32:
            data += b"\0"
        infos += gstr(name) + struct.pack("<I", len(dims)) + struct.pack("<%dQ" % len(dims), *dims)
        infos += struct.pack("<IQ", typ, len(data))
        data += tensor_bytes(vals, typ)
    head = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(meta)) + b"".join(meta) + infos
    while len(head) % 32:
        head += b"\0"
    with open(path, "wb") as f:
        f.write(head + data)


# ------------------------------------------------- a Hugging Face Llama, written as llama.cpp does
# The demo against a model written from transformers' modeling_llama.py, not from tools/demo: the
# weights are made in LlamaForCausalLM's layout (nn.Linear [out, in], rotate_half RoPE), written
# as convert_hf_to_gguf.py's LlamaModel writes them, and run here in NumPy in float64. GQA: 4
# query heads share 2 KV heads; head size 32 (the smallest clpa serves).
HF = {"hidden": 128, "layers": 2, "heads": 4, "kv_heads": 2, "ffn": 256, "theta": 500000.0,
      "eps": 1e-6}


def hf_weights(seed, tied):
    """Random f32 weights named as LlamaForCausalLM's state dict, [out, in] matrices; no norm
    weight 1, so that one applied in the wrong place shows. Tied: no lm_head (the embedding). A
    small embedding keeps the residual from echoing the last token; the large final norm spreads
    the logits (standard deviation 3 to 8)."""
    r = np.random.RandomState(seed)
    H, hd, ffn, vocab = HF["hidden"], HF["hidden"] // HF["heads"], HF["ffn"], len(PIECES)

    def lin(out, inp):
        return r.normal(0, inp ** -0.5, (out, inp)).astype(np.float32)

    w = {"model.embed_tokens.weight": r.normal(0, 0.1, (vocab, H)).astype(np.float32),
         "model.norm.weight": r.uniform(2, 5, H).astype(np.float32)}
    for l in range(HF["layers"]):
        p = "model.layers.%d." % l
        w.update({p + "input_layernorm.weight": r.uniform(0.5, 1.5, H).astype(np.float32),
                  p + "self_attn.q_proj.weight": lin(HF["heads"] * hd, H),
                  p + "self_attn.k_proj.weight": lin(HF["kv_heads"] * hd, H),
                  p + "self_attn.v_proj.weight": lin(HF["kv_heads"] * hd, H),
                  p + "self_attn.o_proj.weight": lin(H, HF["heads"] * hd),
                  p + "post_attention_layernorm.weight": r.uniform(0.5, 1.5, H).astype(np.float32),
                  p + "mlp.gate_proj.weight": lin(ffn, H),
                  p + "mlp.up_proj.weight": lin(ffn, H),
                  p + "mlp.down_proj.weight": lin(H, ffn)})
    if not tied:
        w["lm_head.weight"] = lin(vocab, H)
    return w


def hf_permute(w, n_head):
    """convert_hf_to_gguf.py's LlamaModel.permute: each head's rows from rotate_half's order (the
    two halves) to llama.cpp's RoPE pairs (adjacent rows)."""
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def write_hf_gguf(path, w):
    """The GGUF that convert_hf_to_gguf.py writes for these weights (f32): Q and K permuted
    (K with the KV heads' count), an [out, in] matrix as it is (ggml's ne0 = in), no output.weight
    when tied."""
    names = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output",
             "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "input_layernorm": "attn_norm",
             "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
             "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    tensors = []
    for name, t in w.items():
        if name.endswith("q_proj.weight"):
            t = hf_permute(t, HF["heads"])
        elif name.endswith("k_proj.weight"):
            t = hf_permute(t, HF["kv_heads"])
        m = re.fullmatch(r"model\.layers\.(\d+)\.(.*)\.weight", name)
        gname = "blk.%s.%s" % (m[1], names[m[2]]) if m else names[name[:-len(".weight")]]
        tensors.append((gname + ".weight", list(t.shape[::-1]), t.astype("<f4").tobytes(), T_F32))
    H = HF["hidden"]
    meta = [kv("general.architecture", STR, "llama"), kv("llama.context_length", U32, 256),
            kv("llama.embedding_length", U32, H), kv("llama.block_count", U32, HF["layers"]),
            kv("llama.feed_forward_length", U32, HF["ffn"]),
            kv("llama.rope.dimension_count", U32, H // HF["heads"]),
            kv("llama.attention.head_count", U32, HF["heads"]),
            kv("llama.attention.head_count_kv", U32, HF["kv_heads"]),
            kv("llama.rope.freq_base", F32, HF["theta"]),
            kv("llama.attention.layer_norm_rms_epsilon", F32, HF["eps"]),
            kv("llama.vocab_size", U32, len(PIECES)), kv("general.file_type", U32, 0)]
    write_file(path, meta + tokenizer_meta(), tensors)


def hf_logits(w, ids):
    """LlamaForCausalLM's logits [len(ids), vocab] (modeling_llama.py, eager attention), float64."""
    f = {k: v.astype(np.float64) for k, v in w.items()}
    T, nh, nkv = len(ids), HF["heads"], HF["kv_heads"]
    d = HF["hidden"] // nh

    def rms_norm(x, g):  # LlamaRMSNorm: the weight after the normalization
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + HF["eps"]) * g

    inv_freq = 1.0 / HF["theta"] ** (np.arange(0, d, 2) / d)
    emb = np.concatenate([np.outer(np.arange(T), inv_freq)] * 2, -1)[:, None, :]  # [T, 1, d]
    cos, sin = np.cos(emb), np.sin(emb)

    def rope(x):  # apply_rotary_pos_emb: x * cos + rotate_half(x) * sin
        return x * cos + np.concatenate([-x[..., d // 2:], x[..., :d // 2]], -1) * sin

    causal = np.triu(np.full((T, T), -np.inf), 1)
    x = f["model.embed_tokens.weight"][ids]
    for l in range(HF["layers"]):
        p = "model.layers.%d." % l
        h = rms_norm(x, f[p + "input_layernorm.weight"])
        q = rope((h @ f[p + "self_attn.q_proj.weight"].T).reshape(T, nh, d))
        k = rope((h @ f[p + "self_attn.k_proj.weight"].T).reshape(T, nkv, d))
        v = (h @ f[p + "self_attn.v_proj.weight"].T).reshape(T, nkv, d)
        k, v = np.repeat(k, nh // nkv, 1), np.repeat(v, nh // nkv, 1)  # repeat_kv: head i, KV i // n_rep
        s = np.einsum("qhd,khd->hqk", q, k) / np.sqrt(d) + causal
        a = np.exp(s - s.max(-1, keepdims=True))
        o = np.einsum("hqk,khd->qhd", a / a.sum(-1, keepdims=True), v).reshape(T, nh * d)
        x = x + o @ f[p + "self_attn.o_proj.weight"].T
        h = rms_norm(x, f[p + "post_attention_layernorm.weight"])
        g = h @ f[p + "mlp.gate_proj.weight"].T
        u = h @ f[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ f[p + "mlp.down_proj.weight"].T  # down(silu(gate) * up)
    head = f.get("lm_head.weight", f["model.embed_tokens.weight"])
    return rms_norm(x, f["model.norm.weight"]) @ head.T


def hf_greedy(w, ids, n):
    """Greedy decoding of n tokens (or to EOS): the tokens, and each step's top-1 margin over the
    runner-up relative to the step's scale (max |logit|, at least 1, as --check's)."""
    ids, out, margins = list(ids), [], []
    for _ in range(n):
        z = hf_logits(w, ids)[-1]
        top2 = np.sort(z)[-2:]
        margins.append((top2[1] - top2[0]) / max(1.0, np.abs(z).max()))
        out.append(int(np.argmax(z)))
        if out[-1] == EOS:
            break
        ids.append(out[-1])
    return out, margins


def tokenize(text):
    """SentencePiece (llama.cpp's llm_tokenizer_spm) on this vocabulary, BOS first: ▁ in front and
    for every space; the adjacent pair that makes the best-scored token merges first (ties:
    leftmost); a character that is no token becomes its bytes' tokens."""
    syms, score = list("\u2581" + text.replace(" ", "\u2581")), {w: -i for i, w in enumerate(WORDS)}
    while True:
        pairs = [(score[a + b], -i) for i, (a, b) in enumerate(zip(syms, syms[1:]))
                 if a + b in score]
        if not pairs:
            break
        i = -max(pairs)[1]
        syms[i:i + 2] = [syms[i] + syms[i + 1]]
    return [BOS] + [t for s in syms
                    for t in ([PIECES.index(s)] if s in PIECES else [3 + b for b in s.encode()])]


def piece_bytes(i):
    """What the demo, as llama.cpp's token_to_piece without special, prints for token i."""
    if TOKEN_TYPES[i] not in (1, 4, 6):  # only normal, user-defined and byte tokens print
        return b""
    if TOKEN_TYPES[i] == 6:
        return bytes([int(PIECES[i][3:5], 16)])
    if TOKEN_TYPES[i] == 4:  # user-defined: as stored
        return PIECES[i].encode()
    return PIECES[i].replace("\u2581", " ").encode()


def run(*args):
    return run_child([demo, *args], capture_output=True, text=True, errors="replace", timeout=600)


def run_bytes(*args):
    return run_child([demo, *args], capture_output=True, timeout=600)


def plain_line(answer):
    """An answer as --prompts writes it on its line (bytes)."""
    return answer.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\r", b"\\r")


def json_text(answer):
    """An answer's bytes as the demo's JSON writer reads them (tools/tool_cli.c):
    valid UTF-8 kept, every other byte U+FFFD on its own."""
    out, i = [], 0
    while i < len(answer):
        c = answer[i]
        n = 1 if c < 0x80 else 4 if 0xF0 <= c <= 0xF4 else 3 if 0xE0 <= c <= 0xEF else 2 if 0xC2 <= c < 0xE0 else 0
        try:
            ch = answer[i:i + n].decode("utf-8") if n and i + n <= len(answer) else None
        except UnicodeDecodeError:
            ch = None
        if ch is None:
            out.append("\ufffd")
            i += 1
        else:
            out.append(ch)
            i += n
    return "".join(out)


def alone(model, prompt, *extra):
    """The answer --prompt prints for one prompt (bytes), or None."""
    p = run_bytes("--model", model, "--prompt", prompt, *extra)
    end = p.stdout.rfind(b"\n\nclpa-demo on ")
    if p.returncode != 0 or end < 0 or not p.stdout.startswith(prompt.encode()):
        print("# --prompt %r: exit %d, %r" % (prompt, p.returncode, (p.stdout + p.stderr)[-300:]))
        return None
    return p.stdout[len(prompt.encode()):end]


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "tiny-llama.gguf")
    write_gguf(model)
    p = run("--model", model, "--prompt", "hello world the cat", "--output-min", "1", "--output-max", "12",
            "--check")
    ok(p.returncode == 0 and "check: passed" in p.stdout and p.stdout.startswith("hello world the cat"),
       "a text prompt through a GGUF model: the answer printed, --check passes")
    if p.returncode != 0:
        print("# " + (p.stdout + p.stderr)[-1500:].replace("\n", "\n# "))
    # --prompt with --json: the answer as a JSON line (op "answer", as --prompts writes one)
    # before the summary's; it printed the summary alone
    args = ("--prompt", "hello world the cat", "--output-min", "1", "--output-max", "12")
    p = run("--model", model, *args, "--json")
    js = [json.loads(x) for x in p.stdout.strip().splitlines()] if p.returncode == 0 else []
    a = js[0] if len(js) == 2 else {}
    text = alone(model, "hello world the cat", *args[2:])
    ok(a.get("op") == "answer" and a.get("index") == 0 and "line" not in a and
       a.get("generated_tokens", 0) >= 1 and a.get("finish_reason") in ("stop", "length") and
       js[1].get("op") == "demo" and text is not None and
       a.get("text") == text.decode("utf-8", "replace"),
       "regress: --prompt --json writes the answer's line, then the summary's (%s)"
       % [x.get("op") for x in js])
    p = run("--model", model, "--requests", "8", "--output-min", "4", "--output-max", "8", "--check", "--json")
    j = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {}
    ok(j.get("check_ok") is True and j.get("cached_tokens", 0) > 0,
       "the synthetic workload on the GGUF model passes --check with prefix hits (%s cached)"
       % j.get("cached_tokens"))
    with open(model, "rb") as f:
        whole = f.read()
    cut = os.path.join(tmp, "cut.gguf")
    with open(cut, "wb") as f:
        f.write(whole[: len(whole) // 2])
    p = run("--model", cut, "--prompt", "hi")
    ok(p.returncode == 1 and "cut.gguf" in p.stderr and "past the end" in p.stderr,
       "a truncated file is refused with a message: %s" % p.stderr.strip()[:160])
    other = os.path.join(tmp, "other.gguf")
    write_gguf(other, arch="gpt2")
    p = run("--model", other, "--prompt", "hi")
    ok(p.returncode == 1 and "gpt2" in p.stderr, "a non-llama architecture is named: %s" % p.stderr.strip()[:160])
    # regress (issue 41): GGUF strings are length-prefixed; "llama\0x" read
    # as a C string was "llama" and the file was served as a Llama.
    nul = os.path.join(tmp, "nul.gguf")
    write_gguf(nul, arch="llama\0x")
    p = run("--model", nul, "--prompt", "hi")
    ok(p.returncode == 1 and "metadata 'general.architecture' holds a NUL byte" in p.stderr,
       "regress: an architecture \"llama\\0x\" is refused, the key named: %s" % p.stderr.strip()[:200])
    # regress (issue 41): a prompt the model's context cannot hold was
    # refused and the run exited 0, printing nothing for it.
    short = os.path.join(tmp, "short.gguf")
    write_gguf(short, context=16)
    p = run("--model", short, "--prompt", " ".join(["the cat sat on the mat"] * 4), "--output-min", "1",
            "--output-max", "4")
    m = re.search(r"clpa-demo: --prompt \((\d+) tokens\) plus --output-max 4 does not fit the model's context "
                  r"of 16 tokens", p.stderr)
    ok(p.returncode == 1 and not p.stdout.strip() and m and int(m.group(1)) > 16,
       "regress: a prompt longer than a 16-token context: exit %d, %s" % (p.returncode, p.stderr.strip()[-200:]))
    p = run("--model", short, "--prompt", "hello world", "--output-max", "20")
    m = re.search(r"--prompt \((\d+) tokens\) plus --output-max 20 does not fit the model's context of 16 tokens",
                  p.stderr)
    ok(p.returncode == 1 and m and int(m.group(1)) + 20 > 16 and int(m.group(1)) < 16,
       "regress: a short prompt whose answer passes the context: exit %d, %s"
       % (p.returncode, p.stderr.strip()[-200:]))
    # regress: llama.context_length sized the RoPE table (positions x head_size / 2 pairs):
    # 2^31 - 1 made this 350 KB file ask for 256 GiB (ASan: out of memory in upload_rope);
    # now served up to 2^20 positions, the same answer as with a 512-token context
    huge = os.path.join(tmp, "huge-context.gguf")
    write_gguf(huge, context=2 ** 31 - 1)
    want = alone(model, "hello world", "--output-min", "1", "--output-max", "4")
    got = alone(huge, "hello world", "--output-min", "1", "--output-max", "4")
    ok(got is not None and got == want, "regress: a context_length of 2^31 - 1 is served up to 2^20"
       " positions: %r (512: %r)" % (got, want))
    # issue 42: quantized weight matrices; where every tensor of a fused matrix has one block
    # form (here the output projection, the down projection and the LM head) its blocks go to
    # the device as they are, decoded in the kernels
    for quant, what in (("legacy", "Q8_0 / Q4_0"), ("k", "Q4_K / Q5_K / Q6_K (hidden 256)")):
        qm = os.path.join(tmp, "tiny-%s.gguf" % quant)
        write_gguf(qm, quant=quant)
        p = run("--model", qm, "--prompt", "hello world the cat", "--output-min", "1", "--output-max", "12",
                "--check")
        ok(p.returncode == 0 and "check: passed" in p.stdout and p.stdout.startswith("hello world the cat"),
           "%s weight matrices: the answer printed, --check passes" % what)
        if p.returncode != 0:
            print("# " + (p.stdout + p.stderr)[-1500:].replace("\n", "\n# "))
        p = run("--model", qm, "--requests", "6", "--output-min", "4", "--output-max", "8", "--check", "--json")
        j = json.loads(p.stdout.strip().splitlines()[-1]) if p.returncode == 0 and p.stdout.strip() else {}
        ok(j.get("check_ok") is True, "%s weight matrices: the synthetic workload passes --check" % what)
        want = "blocks q8_0" if quant == "legacy" else "blocks q4_K q6_K"
        ok(want in j.get("weight_dtype", ""), "%s: the device keeps blocks (weights: %s)"
           % (what, j.get("weight_dtype")))
    # regress: llama.rope.scaling.type / .factor were ignored. Linear scaling divides every RoPE
    # frequency by the factor (llama.cpp: freq_scale = 1 / factor), which is what rope_freqs.weight
    # all equal to the factor does: the two files must answer alike, and unlike the unscaled one.
    prompt = "the cat sat on the mat the cat sat on the mat hello world"
    scaled, freqs = os.path.join(tmp, "linear.gguf"), os.path.join(tmp, "freqs.gguf")
    write_gguf(scaled, more_meta=[("llama.rope.scaling.type", STR, "linear"),
                                  ("llama.rope.scaling.factor", F32, 8.0)])
    write_gguf(freqs, more_tensors=[("rope_freqs.weight", [16], [8.0] * 16)])
    a_plain, a_scaled, a_freqs = (alone(m, prompt, "--output-max", "16")
                                  for m in (model, scaled, freqs))
    ok(a_scaled is not None and a_scaled == a_freqs and a_scaled != a_plain,
       "regress: linear RoPE scaling (factor 8) answers as rope_freqs.weight of 8s does, not as the"
       " unscaled model (%r, %r, %r)" % (a_scaled, a_freqs, a_plain))
    p = run("--model", scaled, "--prompt", prompt, "--output-max", "16", "--check")
    ok(p.returncode == 0 and "check: passed" in p.stdout,
       "regress: linear RoPE scaling passes --check")
    yarn = os.path.join(tmp, "yarn.gguf")
    write_gguf(yarn, more_meta=[("llama.rope.scaling.type", STR, "yarn"),
                                ("llama.rope.scaling.factor", F32, 4.0)])
    p = run("--model", yarn, "--prompt", "hi")
    ok(p.returncode == 1 and "llama.rope.scaling.type 'yarn' is not supported" in p.stderr,
       "regress: YaRN RoPE scaling is refused: %s" % p.stderr.strip()[-200:])

    odd = os.path.join(tmp, "odd.gguf")
    write_gguf(odd, odd=("blk.0.attn_q.weight", T_Q4_K))
    p = run("--model", odd, "--prompt", "hi")
    ok(p.returncode == 1 and "tensor 'blk.0.attn_q.weight': ne[0] = 64 is not a multiple of q4_K's block of 256"
       in p.stderr, "a Q4_K matrix of 64 columns is refused, tensor and type named: %s" % p.stderr.strip()[:200])
    write_gguf(odd, odd=("blk.1.ffn_up.weight", T_Q4_1))
    p = run("--model", odd, "--prompt", "hi")
    ok(p.returncode == 1 and "tensor 'blk.1.ffn_up.weight' has type q4_1; the demo reads f32, f16, bf16, q4_0, "
       "q8_0, q4_K, q5_K and q6_K" in p.stderr,
       "a q4_1 matrix is refused, the types read listed: %s" % p.stderr.strip()[-200:])
    p = run("--prompt", "hi")
    ok(p.returncode == 2 and "--model" in p.stderr, "--prompt without --model is a usage error")

    # --prompts: a plain file (a blank line skipped; a line that starts with
    # "{" is text, since the first line decides the format), two prompts
    # that share whole blocks for the prefix cache, and one too long for the
    # 512-token context, refused in its place.
    mat = "the cat sat on the mat " * 3
    texts = ["hello world the cat", mat + "hello", mat + "world", "{the cat}", "a"]
    too_long = "the cat sat on the mat " * 40
    plain = os.path.join(tmp, "prompts.txt")
    with open(plain, "w") as f:
        f.write("\n".join(texts[:2]) + "\n\n" + "\n".join(texts[2:]) + "\n" + too_long + "\n")
    p = run_bytes("--model", model, "--prompts", plain, "--output-max", "10")
    lines = p.stdout.split(b"\n")
    ok(p.returncode == 0 and len(lines) == len(texts) + 2 and lines[-1] == b"" and b"requests" in p.stderr
       and b"clpa-demo on" not in p.stdout,
       "--prompts, plain: %d answer lines on stdout, the summary on stderr (exit %d)"
       % (len(lines) - 1, p.returncode))
    if p.returncode != 0:
        print("# " + p.stderr.decode(errors="replace")[-800:].replace("\n", "\n# "))
    answers = [alone(model, t, "--output-max", "10") for t in texts]
    same = [a is not None and i < len(lines) and lines[i] == plain_line(a) for i, a in enumerate(answers)]
    ok(all(same), "each answer, in the file's order, is what --prompt gives that prompt alone (greedy): %s"
       % same)
    # All of them arrive at once and are admitted together, so the two that
    # share a prefix both compute it; one at a time, the second finds it.
    p1 = run_bytes("--model", model, "--prompts", plain, "--output-max", "10", "--max-running", "1")
    m = re.search(rb"served from cache +(\d+)", p1.stderr)
    ok(p1.returncode == 0 and p1.stdout == p.stdout and m and int(m.group(1)) >= 16,
       "one request at a time: the same answers, and the prompts sharing a prefix hit the cache (%s tokens)"
       % (m.group(1).decode() if m else None))
    p1 = run("--model", model, "--prompts", plain, "--output-max", "10", "--check")
    ok(p1.returncode == 0 and "check: passed: 5 requests" in p1.stderr,
       "--prompts with --check: the 5 served pass (the verdict on stderr)")
    refusal = lines[len(texts)] if len(lines) > len(texts) else b""
    ok(re.fullmatch(rb"\[refused: \d+ prompt tokens \+ max_tokens 10 is past the model's context of 512 tokens\]",
                    refusal),
       "the prompt too long for the context is refused in its place: %r" % refusal[:120])

    # JSON lines: the same prompts written with escapes, max_tokens per line
    # (one past the context), a blank line, CRLF.
    def esc(t):
        return t.replace("t", "\\u0074").replace(" ", "\\u0020", 1)
    jl = os.path.join(tmp, "prompts.jsonl")
    with open(jl, "w", newline="") as f:
        f.write('{"prompt": "%s"}\n' % esc(texts[0]))
        f.write('\r\n{ "max_tokens" : 10, "prompt": "%s" }\r\n' % esc(texts[1]))
        f.write('{"prompt": "%s", "max_tokens": 3}\n' % esc(texts[2]))
        f.write('{"prompt": "%s", "max_tokens": 600}\n' % texts[4])
        f.write('{"prompt": "caf\\u00e9 \\ud83d\\ude00 \\"q\\" \\\\ \\n"}\n')
    p = run("--model", model, "--prompts", jl, "--output-max", "10", "--json")
    try:
        objs = [json.loads(l) for l in p.stdout.splitlines()]
        summary = json.loads(p.stderr.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        objs, summary = [], {}
    ok(p.returncode == 0 and [o.get("index") for o in objs] == [0, 1, 2, 3, 4]
       and [o.get("line") for o in objs] == [1, 3, 4, 5, 6] and summary.get("requests") == 5
       and all(o.get("op") == "answer" for o in objs) and summary.get("op") == "demo",
       "--prompts, JSON lines: 5 objects (op answer) in order with their line numbers, the JSON"
       " summary (op demo) on stderr")
    if len(objs) == 5 and None not in answers:
        ok(objs[0]["text"] == json_text(answers[0]) and objs[1]["text"] == json_text(answers[1])
           and objs[0]["generated_tokens"] == 10 and objs[0]["finish_reason"] == "length",
           "escaped prompts get the answers of their plain text: %r" % objs[0]["text"][:40])
        ok(objs[2]["generated_tokens"] == 3 and objs[2]["finish_reason"] == "length"
           and json_text(answers[2]).startswith(objs[2]["text"].rstrip("\ufffd")),
           "max_tokens 3 stops after 3 tokens, the start of the 10-token answer: %r" % objs[2]["text"])
        ok(objs[3]["finish_reason"] == "refused" and objs[3]["generated_tokens"] == 0 and objs[3]["text"] == ""
           and "max_tokens 600 is past the model's context of 512" in objs[3].get("error", ""),
           "max_tokens 600 is refused in its place: %s" % objs[3].get("error"))
        with_unicode = alone(model, "caf\u00e9 \U0001F600 \"q\" \\ \n", "--output-max", "10")
        ok(with_unicode is not None and objs[4]["text"] == json_text(with_unicode),
           "\\u00e9, a surrogate pair, \\\" \\\\ and \\n decode to the text that --prompt is given")

    bad = os.path.join(tmp, "bad.jsonl")
    with open(bad, "w") as f:
        f.write('{"prompt": "a"}\n\n{"prompt": "b", "max_tokens": 2.5}\n')
    p = run("--model", model, "--prompts", bad)
    ok(p.returncode == 2 and not p.stdout and "bad.jsonl:3:31: \"max_tokens\" takes an integer" in p.stderr,
       "a malformed line: exit %d, %s" % (p.returncode, p.stderr.strip().split("\n")[0]))
    with open(bad, "w") as f:
        f.write('{"prompt": "a"}\nthe cat\n')
    p = run("--model", model, "--prompts", bad)
    ok(p.returncode == 2 and "bad.jsonl:2:1: expected a JSON object" in p.stderr,
       "a plain line in a JSON file: exit %d, %s" % (p.returncode, p.stderr.strip().split("\n")[0]))
    with open(bad, "w") as f:
        f.write("\n  \n")
    p = run("--model", model, "--prompts", bad)
    ok(p.returncode == 2 and "no prompts" in p.stderr, "a file of blank lines: exit %d" % p.returncode)
    p = run("--model", model, "--prompts", os.path.join(tmp, "missing.txt"))
    ok(p.returncode == 1 and "missing.txt" in p.stderr, "a missing file: exit %d" % p.returncode)
    p = run("--model", model, "--prompts", plain, "--prompt", "hi")
    ok(p.returncode == 2 and "do not go together" in p.stderr, "--prompt and --prompts together: exit 2")
    p = run("--prompts", plain)
    ok(p.returncode == 2 and "--model" in p.stderr, "--prompts without --model: exit 2")

    # Every request refused: the refusals are printed, then the run fails.
    with open(bad, "w") as f:
        f.write("the cat sat on the mat the cat sat on the mat\nhello world the cat\n")
    p = run("--model", short, "--prompts", bad, "--output-max", "4")
    ok(p.returncode == 1 and p.stdout.count("[refused: ") == 2 and "every request" in p.stderr,
       "every prompt refused: both refusals printed, exit %d" % p.returncode)

    # Sampling: seeded, independent of the batching; top-k 1 is greedy.
    sample = ["--model", model, "--prompts", plain, "--output-max", "10", "--temperature", "1", "--top-p", "0.95"]
    a = run_bytes(*sample, "--seed", "5").stdout
    b = run_bytes(*sample, "--seed", "5", "--max-running", "1", "--no-prefix-cache").stdout
    c = run_bytes(*sample, "--seed", "6").stdout
    ok(a and a == b, "one seed samples the same answers, all batched or one request at a time without"
       " the prefix cache")
    ok(a and c and a != c, "another seed samples other answers")
    k1 = run_bytes("--model", model, "--prompts", plain, "--output-max", "10", "--temperature", "2",
                   "--top-k", "1", "--seed", "5").stdout
    ok(k1 and k1.split(b"\n")[:len(texts)] == lines[:len(texts)], "--top-k 1 at temperature 2 gives the greedy answers")
    p = run("--model", model, "--prompt", "hi", "--temperature", "0.5", "--check")
    ok(p.returncode == 2 and "--check" in p.stderr and "--temperature 0" in p.stderr,
       "--check with sampling is refused: %s" % p.stderr.strip().split("\n")[0])

    # The demo against Hugging Face's Llama (hf_logits): greedy answers to two prompts, one past a
    # 16-token KV block, each cut after 1, 2, ... N tokens (one request each, served together) so
    # that every generated token's bytes are compared in its place. --check in the same run holds
    # the demo's logits within 2e-3 of their scale of the host reference's, so where NumPy's top-1
    # leads by twice that, a convention both share correctly cannot pick another token.
    hf_prompts, n_gen = ["hello world", "the cat sat on a mat; a dog ate the hat, then sat"], 8
    for tied in (False, True):
        what = "tied embeddings" if tied else "an LM head"
        if np is None:
            ok(False, "the demo against a NumPy Llama (%s): no NumPy (apt-get install python3-numpy)"
               % what)
            continue
        hf = hf_weights(2, tied)
        path = os.path.join(tmp, "hf-llama%s.gguf" % ("-tied" if tied else ""))
        write_hf_gguf(path, hf)
        want, margins, lines = [], [], []
        for text in hf_prompts:
            gen, m = hf_greedy(hf, tokenize(text), n_gen)
            margins += m
            want += [plain_line(b"".join(map(piece_bytes, gen[:k]))) for k in range(1, n_gen + 1)]
            lines += [json.dumps({"prompt": text, "max_tokens": k}) for k in range(1, n_gen + 1)]
        jl = os.path.join(tmp, "hf.jsonl")
        with open(jl, "w") as f:
            f.write("\n".join(lines) + "\n")
        p = run_bytes("--model", path, "--prompts", jl, "--kv-dtype", "f32", "--check")
        got = p.stdout.split(b"\n")[:-1]
        bad = [(i // n_gen, i % n_gen + 1, want[i], g) for i, g in enumerate(got) if g != want[i]]
        ok(p.returncode == 0 and b"check: passed" in p.stderr and len(got) == len(want) and not bad
           and min(margins) >= 4e-3,
           "a Hugging Face Llama (GQA 4/2, %s) written as convert_hf_to_gguf.py does: the demo's %d"
           " greedy tokens are NumPy's (top-1 margins >= %.3g of the scale)"
           % (what, len(margins), min(margins)),
           "exit %d; %d of %d answers; first difference (prompt, tokens, NumPy, demo): %s\n%s"
           % (p.returncode, len(got), len(want), bad[:1], p.stderr.decode(errors="replace")[-600:]))

done()
