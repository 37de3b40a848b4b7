"""A small GGUF reader and writer for the tests (no numpy, no gguf package).

Written from the format description (ggml's docs/gguf.md), independently of
src/model/gguf.c, so that each checks the other:

    write(path_or_None, kvs, tensors=(), version=3, alignment=None) -> bytes
    read(path_or_bytes) -> (kvs: dict, tensors: list, info: dict)

kvs maps a key to a value, or to (type, value) to force a type; plain
Python values get a natural type (str -> string, bool -> bool, int ->
int32/int64/uint64 by range, float -> float32, list -> array of the first
element's type). Arrays hold (elem_type, [values]) when forced. Tensors are
(name, ne, ggml_type, data_bytes); their offsets are assigned in order,
aligned.
"""
import struct

UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64, FLOAT64 = range(13)
SCALAR = {UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
          FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d"}

# ggml type -> (block elements, block bytes), for the types the tests use.
GGML_BLOCKS = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 8: (32, 34), 12: (256, 144),
               14: (256, 210), 30: (1, 2)}

# Token types of tokenizer.ggml.token_type.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


def natural_type(v):
    if isinstance(v, bool):
        return BOOL
    if isinstance(v, int):
        if -(1 << 31) <= v < (1 << 31):
            return INT32
        return INT64 if v < 0 else UINT64
    if isinstance(v, float):
        return FLOAT32
    if isinstance(v, (str, bytes)):
        return STRING
    if isinstance(v, (list, tuple)):
        return ARRAY
    raise TypeError("no GGUF type for %r" % (v,))


def _str(s):
    b = s.encode() if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _value(t, v):
    if t == STRING:
        return _str(v)
    if t == ARRAY:
        if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], int) and isinstance(v[1], list):
            et, items = v
        else:
            items = list(v)
            et = natural_type(items[0]) if items else UINT8
            if et == INT32 and any(not isinstance(x, bool) and isinstance(x, int) and
                                   not -(1 << 31) <= x < (1 << 31) for x in items):
                et = INT64
        out = [struct.pack("<IQ", et, len(items))]
        if et in SCALAR and et != BOOL and items:
            out.append(struct.pack("<%d%s" % (len(items), SCALAR[et][1]), *items))
        else:
            out.extend(_value(et, x) for x in items)
        return b"".join(out)
    return struct.pack(SCALAR[t], v)


def write(path, kvs, tensors=(), version=3, alignment=None):
    """Returns the file's bytes (and writes them to path unless it is None)."""
    align = alignment if alignment is not None else 32
    items = list(kvs.items())
    if alignment is not None and "general.alignment" not in kvs:
        items.append(("general.alignment", (UINT32, alignment)))
    out = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(items))]
    for k, v in items:
        t, v = v if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], int) and \
            not isinstance(v[0], bool) else (natural_type(v), v)
        out.append(_str(k) + struct.pack("<I", t) + _value(t, v))
    offset, datas = 0, []
    for name, ne, gtype, data in tensors:
        out.append(_str(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) +
                   struct.pack("<IQ", gtype, offset))
        pad = (-len(data)) % align
        datas.append(data + b"\0" * pad)
        offset += len(data) + pad
    head = b"".join(out)
    head += b"\0" * ((-len(head)) % align)
    blob = head + b"".join(datas)
    if path is not None:
        with open(path, "wb") as f:
            f.write(blob)
    return blob


class _Reader:
    def __init__(self, b):
        self.b, self.pos = b, 0

    def take(self, n):
        if self.pos + n > len(self.b):
            raise ValueError("truncated at byte %d" % self.pos)
        s = self.b[self.pos:self.pos + n]
        self.pos += n
        return s

    def unpack(self, fmt):
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self):
        return self.take(self.unpack("<Q")).decode("utf-8", errors="surrogateescape")

    def value(self, t):
        if t == STRING:
            return self.string()
        if t == ARRAY:
            et, n = self.unpack("<I"), self.unpack("<Q")
            if et in SCALAR and et != BOOL:
                size = struct.calcsize(SCALAR[et])
                return list(struct.unpack("<%d%s" % (n, SCALAR[et][1]), self.take(n * size)))
            return [self.value(et) for _ in range(n)]
        return self.unpack(SCALAR[t])


def read(src):
    """Parses a GGUF file (a path or bytes): (kvs, tensors, info)."""
    b = src if isinstance(src, (bytes, bytearray)) else open(src, "rb").read()
    r = _Reader(b)
    if r.take(4) != b"GGUF":
        raise ValueError("not a GGUF file")
    version, n_tensors, n_kv = r.unpack("<I"), r.unpack("<Q"), r.unpack("<Q")
    kvs = {}
    for _ in range(n_kv):
        k = r.string()
        kvs[k] = r.value(r.unpack("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        ne = [r.unpack("<Q") for _ in range(r.unpack("<I"))]
        tensors.append({"name": name, "ne": ne, "type": r.unpack("<I"), "offset": r.unpack("<Q")})
    align = kvs.get("general.alignment", 32)
    data = (r.pos + align - 1) // align * align
    return kvs, tensors, {"version": version, "alignment": align, "data_offset": data}
