#!/usr/bin/env python3
"""clpa-demo --model on a GGUF file this test writes itself: a tiny Llama
(2 layers, hidden 64, 2/1 heads of 32, f32, f16 and bf16 tensors) with a
SentencePiece tokenizer (byte fallback), in GGUF v3. The demo must serve a
text prompt and print its answer, pass --check against the host reference
(which reads the same weights), serve the synthetic workload on it, and
refuse a truncated file, a non-llama architecture or one holding a NUL
byte with a message naming the problem, and fail (exit 1) a prompt that
does not fit the model's context, saying both lengths. TAP output.

usage: test_demo_gguf_model.py CLPA_DEMO"""
import json
import os
import random
import re
import struct
import subprocess
import sys
import tempfile

demo = sys.argv[1]
n = 0
failed = 0


def ok(cond, what):
    global n, failed
    n += 1
    print(("ok %d - %s" if cond else "not ok %d - %s") % (n, what), flush=True)
    if not cond:
        failed += 1
    return cond


# GGUF value types and ggml tensor types used here.
U32, I32, F32, STR, ARR = 4, 5, 6, 8, 9
T_F32, T_F16, T_BF16 = 0, 1, 30


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


def tensor_bytes(vals, typ):
    if typ == T_F32:
        return struct.pack("<%df" % len(vals), *vals)
    if typ == T_F16:
        return struct.pack("<%dH" % len(vals), *[f16_bits(v) for v in vals])
    # bf16: the top half of the f32 bits (truncation is a valid bf16 value)
    return struct.pack("<%dH" % len(vals), *[struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in vals])


def write_gguf(path, arch="llama", context=512):
    rng = random.Random(7)
    hidden, layers, heads, kv_heads, hd, ffn = 64, 2, 2, 1, 32, 128
    pieces = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    words = ["\u2581the", "\u2581a", "\u2581cat", "\u2581sat", "\u2581on", "\u2581mat", "\u2581hello",
             "\u2581world", "\u2581", "e", "t", "a", "o", "n", "s", "h", "l", "r", "d", "w", "c", "m"]
    pieces += words
    vocab = len(pieces)
    types = [2, 3, 3] + [6] * 256 + [1] * len(words)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(words))]
    meta = [kv("general.architecture", STR, arch), kv("llama.embedding_length", U32, hidden),
            kv("llama.block_count", U32, layers), kv("llama.attention.head_count", U32, heads),
            kv("llama.attention.head_count_kv", U32, kv_heads), kv("llama.feed_forward_length", U32, ffn),
            kv("llama.context_length", U32, context), kv("llama.rope.freq_base", F32, 10000.0),
            kv("llama.attention.layer_norm_rms_epsilon", F32, 1e-5),
            kv("tokenizer.ggml.model", STR, "llama"), kv("tokenizer.ggml.tokens", ARR, (STR, pieces)),
            kv("tokenizer.ggml.scores", ARR, (F32, scores)), kv("tokenizer.ggml.token_type", ARR, (I32, types)),
            kv("tokenizer.ggml.bos_token_id", U32, 1), kv("tokenizer.ggml.eos_token_id", U32, 2)]

    def mat(rows, cols, scale):
        return [rng.uniform(-1, 1) * scale for _ in range(rows * cols)]

    tensors = [("token_embd.weight", [hidden, vocab], mat(vocab, hidden, 1.0), T_F32),
               ("output_norm.weight", [hidden], [1.0 + rng.uniform(-0.1, 0.1) for _ in range(hidden)], T_F32),
               ("output.weight", [hidden, vocab], mat(vocab, hidden, 3.0 / hidden ** 0.5), T_F16)]
    for l in range(layers):
        p = "blk.%d." % l
        tensors += [(p + "attn_norm.weight", [hidden], [1.0] * hidden, T_F32),
                    (p + "attn_q.weight", [hidden, heads * hd], mat(heads * hd, hidden, hidden ** -0.5), T_F16),
                    (p + "attn_k.weight", [hidden, kv_heads * hd], mat(kv_heads * hd, hidden, hidden ** -0.5), T_BF16),
                    (p + "attn_v.weight", [hidden, kv_heads * hd], mat(kv_heads * hd, hidden, hidden ** -0.5), T_F32),
                    (p + "attn_output.weight", [heads * hd, hidden], mat(hidden, heads * hd, (heads * hd) ** -0.5), T_F32),
                    (p + "ffn_norm.weight", [hidden], [1.0] * hidden, T_F32),
                    (p + "ffn_gate.weight", [hidden, ffn], mat(ffn, hidden, hidden ** -0.5), T_F16),
                    (p + "ffn_up.weight", [hidden, ffn], mat(ffn, hidden, hidden ** -0.5), T_F32),
                    (p + "ffn_down.weight", [ffn, hidden], mat(hidden, ffn, ffn ** -0.5), T_F32)]
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


def run(*args):
    return subprocess.run([demo, *args], capture_output=True, text=True, errors="replace", timeout=600)


with tempfile.TemporaryDirectory() as tmp:
    model = os.path.join(tmp, "tiny-llama.gguf")
    write_gguf(model)
    p = run("--model", model, "--prompt", "hello world the cat", "--output-min", "1", "--output-max", "12",
            "--check")
    ok(p.returncode == 0 and "check: passed" in p.stdout and p.stdout.startswith("hello world the cat"),
       "a text prompt through a GGUF model: the answer printed, --check passes")
    if p.returncode != 0:
        print("# " + (p.stdout + p.stderr)[-1500:].replace("\n", "\n# "))
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
    p = run("--prompt", "hi")
    ok(p.returncode == 2 and "--model" in p.stderr, "--prompt without --model is a usage error")

print("1..%d" % n)
sys.exit(1 if failed else 0)
