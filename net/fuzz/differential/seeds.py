"""Differential check (README.md): valid v3 Request and Response bodies, encoded by hand,
that mutate.py starts from."""
import random
def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80); v >>= 7
    out.append(v); return bytes(out)
def tag(f, wt): return varint((f << 3) | wt)
def vf(f, v): return tag(f, 0) + varint(v)
def lf(f, b): return tag(f, 2) + varint(len(b)) + b
def header(op, txn=1, ver=3, prio=None):
    h = vf(1, ver) + vf(2, op) + vf(3, txn)
    if prio is not None: h += vf(4, prio)
    return lf(1, h)
def ctx(): return lf(200, lf(1, b'k') + lf(2, b'v'))
def request_seeds():
    key = bytes(range(20)); body = bytes(24) + b'payload'
    s = []
    s.append(header(1) + lf(100, vf(1, 5) + vf(2, 3)))
    s.append(header(1, prio=1) + lf(100, vf(1, 5) + vf(2, -1 & (2**64-1)) + lf(3, key) + vf(4, 7) + vf(5, 1000) + vf(100, 2)))
    s.append(header(1) + lf(100, vf(1, 5) + vf(2, 3) + lf(3, key) + vf(100, 1)))
    s.append(header(2) + lf(101, vf(1, 5) + vf(2, 3) + lf(3, key) + lf(4, body)))
    s.append(header(2) + lf(101, vf(1, 5) + vf(2, 3) + lf(3, key) + lf(4, body) + vf(5, 1) + vf(100, 1)) + ctx())
    s.append(header(5) + lf(102, lf(1, b'BookKeeperAuth') + lf(2, b'')))
    s.append(header(6) + lf(103, vf(1, 5) + vf(2, 3) + lf(3, key) + lf(4, bytes(16))))
    s.append(header(7) + lf(104, vf(1, 5)))
    s.append(header(8) + lf(105, vf(1, 3)))
    s.append(header(8) + lf(105, b''))
    s.append(header(9) + lf(106, b''))
    s.append(header(10) + lf(107, vf(1, 5)))
    s.append(header(11) + lf(108, vf(1, 5)))
    s.append(header(3))
    s.append(header(12))
    return s
def response_seeds():
    key = bytes(range(20)); body = bytes(24) + b'payload'
    s = []
    st = lambda c=0: vf(2, c)
    s.append(header(1) + st() + lf(100, vf(1, 0) + vf(2, 5) + vf(3, 3) + lf(4, body) + vf(5, 2) + vf(6, 1234)))
    s.append(header(1) + vf(2, 403) + lf(100, vf(1, 403) + vf(2, 5) + vf(3, 3)))
    s.append(header(2) + st() + lf(101, vf(1, 0) + vf(2, 5) + vf(3, 3)))
    s.append(header(5) + st() + lf(102, lf(1, b'BookKeeperAuth') + lf(2, b'x')))
    s.append(header(6) + st() + lf(103, vf(1, 0) + vf(2, 5)))
    s.append(header(7) + st() + lf(104, vf(1, 0) + vf(2, 5) + lf(3, bytes(16)) + lf(4, body)))
    s.append(header(8) + st() + lf(105, vf(1, 0) + vf(2, 1000) + vf(3, 500)))
    s.append(header(9) + st() + lf(106, b''))
    s.append(header(10) + st() + lf(107, vf(1, 0) + vf(2, 5)))
    s.append(header(11) + st() + lf(108, vf(1, 0) + vf(2, 5) + lf(3, bytes(20))))
    s.append(header(3) + vf(2, 101))
    return s
