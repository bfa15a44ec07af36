"""Differential check (README.md): prints "KIND HEX" lines, the seeds of seeds.py and COUNT
distinct mutations of them. Usage: mutate.py req|resp SEED COUNT."""
import os, random, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeds import *
kind = sys.argv[1]; random.seed(int(sys.argv[2])); n = int(sys.argv[3])
bodies = request_seeds() if kind == 'req' else response_seeds()
interesting = [b'\x00', b'\x02\x00', b'\x0b', b'\x0c', b'\x0e', b'\x0f', b'\x93\x03\x94\x03', b'\x94\x03', b'\x93\x03', b'\x0b\x0c', b'\x13\x14',
               b'\x80', b'\xff', b'\x08\x00', b'\x0a\x00', b'\x12\x00', b'\x0d\x00\x00\x00\x00', b'\x09' + b'\x00'*8, b'\x10\x00', b'\x18\x00',
               b'\x0a\x02\x18\x02', b'\xa2\x06\x00', b'\xaa\x06\x00', b'\xc2\x06\x00', b'\x80\x80\x80\x80\x00', b'\xc2\x06\x02\x08\x05', b'\x01\x00', b'\x05']
def mutate(b):
    b = bytearray(b)
    for _ in range(random.randint(1, 3)):
        r = random.randrange(8)
        if r == 0 and b:
            b[random.randrange(len(b))] ^= 1 << random.randrange(8)
        elif r == 1 and b:
            b[random.randrange(len(b))] = random.choice([0, 1, 2, 3, 4, 5, 6, 7, 0x0a, 0x0b, 0x0c, 0x80, 0xff, 0x7f])
        elif r in (2, 7):
            at = random.randrange(len(b) + 1)
            b[at:at] = random.choice(interesting)
        elif r == 3 and b:
            del b[random.randrange(len(b)):]
        elif r == 4 and b:
            at = random.randrange(len(b)); ln = random.randrange(1, 4)
            del b[at:at+ln]
        elif r == 5:
            b += random.choice(bodies)
        else:
            at = random.randrange(len(b) + 1)
            b[at:at] = bytes(random.randrange(256) for _ in range(random.randrange(1, 3)))
    return bytes(b)
seen = set()
for s in bodies: print(kind, s.hex())
for _ in range(n):
    m = mutate(random.choice(bodies))
    if m and m not in seen:
        seen.add(m); print(kind, m.hex())
