"""A bitnet.cpp GGUF with its token embedding (the tied head) re-encoded in q8_0, the rest as is.

bitnet.cpp's llama-quantize makes an I2_S file with a q8_0 head (--token-embedding-type q8_0),
but it cannot read a TL2 file (its row check does not know the type), and its converter writes
the embedding in f32 or f16 only; gguf-py's reader cannot read a TL2 file either (the converter
pads TL2 tensors to a size its type table does not give). So this walks the GGUF itself: the
header and key-value section are copied byte for byte, every tensor's bytes are those up to the
next tensor's offset, and token_embd.weight is written in q8_0 (blocks of 32: an f16 scale
amax / 127 and int8 codes rounded half away from zero, as ggml's reference quantizer does).

  python3 bench/bitnet_q8head.py IN.gguf OUT.gguf
Needs numpy only.
"""
import os
import struct
import sys

import numpy as np

# GGUF value types: fixed sizes; 8 is a string, 9 an array
FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
F32, F16, Q8_0 = 0, 1, 8


class Reader:
    def __init__(self, buf):
        self.buf, self.pos = buf, 0

    def take(self, fmt):
        v = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take("Q")
        s = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return s.decode("utf-8")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("I"), self.take("Q")
            return [self.value(et) for _ in range(n)] if et in (8, 9) else self.skip(FIXED[et] * n)
        return self.take({0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?",
                          10: "Q", 11: "q", 12: "d"}[t])

    def skip(self, n):
        self.pos += n


def q8_0(x):
    # x: (rows, cols) f32, cols a multiple of 32 -> rows x cols/32 blocks of (f16 d, 32 x int8)
    b = x.reshape(-1, 32)
    d = np.abs(b).max(axis=1) / 127
    inv = np.divide(1, d, out=np.zeros_like(d), where=d != 0)
    v = b * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    out = np.empty(b.shape[0], dtype=[("d", "<f2"), ("q", "i1", 32)])
    out["d"], out["q"] = d.astype(np.float16), q
    return out.tobytes()


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: bitnet_q8head.py IN.gguf OUT.gguf")
    src, dst = sys.argv[1], sys.argv[2]
    buf = memoryview(open(src, "rb").read())
    r = Reader(buf)
    if r.take("I") != 0x46554747 or r.take("I") != 3:
        sys.exit(f"bitnet_q8head.py: {src} is not a GGUF version 3 file")
    n_tensors, n_kv = r.take("Q"), r.take("Q")
    align = 32
    for _ in range(n_kv):
        key, t = r.string(), r.take("I")
        v = r.value(t)
        if key == "general.alignment":
            align = v
    kv_end = r.pos
    infos = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("I")
        dims = [r.take("Q") for _ in range(nd)]
        infos.append([name, dims, r.take("I"), r.take("Q")])
    data0 = -(-r.pos // align) * align
    offsets = sorted(i[3] for i in infos) + [len(buf) - data0]
    blobs = []
    for name, dims, typ, off in infos:
        raw = bytes(buf[data0 + off:data0 + offsets[offsets.index(off) + 1]])
        if name == "token_embd.weight":
            if typ not in (F32, F16):
                sys.exit(f"bitnet_q8head.py: {src}: token_embd.weight has type {typ}, expected F32 or F16")
            n = int(np.prod(dims))
            x = np.frombuffer(raw, dtype=np.float32 if typ == F32 else np.float16, count=n)
            raw, typ = q8_0(x.astype(np.float32)), Q8_0
        blobs.append((name, dims, typ, raw))
    if not any(b[0] == "token_embd.weight" for b in blobs):
        sys.exit(f"bitnet_q8head.py: {src} has no token_embd.weight")
    head = bytearray(buf[:kv_end])
    off = 0
    for name, dims, typ, raw in blobs:
        nb = name.encode()
        head += struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims))
        head += struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", typ, off)
        off += -(-len(raw) // align) * align
    tmp = dst + ".tmp"
    with open(tmp, "wb") as f:
        f.write(head + bytes(-len(head) % align))
        for _, _, _, raw in blobs:
            f.write(raw + bytes(-len(raw) % align))
    os.replace(tmp, dst)
    print(f"{dst}: token_embd.weight in q8_0, {len(blobs) - 1} other tensors copied")


if __name__ == "__main__":
    main()
