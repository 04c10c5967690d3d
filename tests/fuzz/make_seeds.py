#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>): valid and
nearly valid checkpoints and IDX files, and fixed random bytes for the import and kernel
targets, whose inputs are streams of choices. Run from anywhere; the output is checked in."""
import os
import random
import struct

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'corpus')


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


# weft's dtype codes (core/dtype.hpp): the ones the seeds use, with their sizes.
DTYPES = {'bool': (1, 1), 'int32': (4, 4), 'int64': (5, 8), 'uint8': (6, 1), 'float32': (12, 4), 'float64': (13, 8)}


def checkpoint(tensors):
    """tensors: (name, dtype name, dims, payload bytes)"""
    head = b'WEFTCKPT' + struct.pack('<II', 1, len(tensors))
    size = len(head) + 4 + sum(4 + len(n) + 2 + 8 * len(d) + 20 for n, _, d, _ in tensors)
    index, offset = head, size
    for name, dt, dims, payload in tensors:
        index += struct.pack('<I', len(name)) + name.encode() + struct.pack('<BB', DTYPES[dt][0], len(dims))
        index += b''.join(struct.pack('<q', d) for d in dims)
        index += struct.pack('<QQI', offset, len(payload), crc32c(payload))
        offset += len(payload)
    index += struct.pack('<I', crc32c(index))
    return index + b''.join(p for _, _, _, p in tensors)


def write(target, name, data):
    os.makedirs(os.path.join(here, target), exist_ok=True)
    with open(os.path.join(here, target, name), 'wb') as f:
        f.write(data)


write('checkpoint', 'one_float', checkpoint([('w', 'float32', [2, 3], struct.pack('<6f', *range(6)))]))
write('checkpoint', 'scalar_and_empty', checkpoint([('s', 'float64', [], struct.pack('<d', 2.5)), ('e', 'int32', [0, 4], b'')]))
write('checkpoint', 'three', checkpoint([('a', 'int64', [2], struct.pack('<2q', -1, 7)), ('b', 'uint8', [3], b'\x01\x02\x03'),
                                         ('c', 'bool', [2, 1], b'\x01\x00')]))
write('checkpoint', 'none', checkpoint([]))
good = checkpoint([('w', 'float32', [2], struct.pack('<2f', 1, 2))])
write('checkpoint', 'truncated', good[:-3])


def idx(code, dims, payload):
    return bytes([0, 0, code, len(dims)]) + b''.join(struct.pack('>I', d) for d in dims) + payload


write('idx', 'uint8_images', idx(0x08, [2, 2, 3], bytes(range(12))))
write('idx', 'float32', idx(0x0D, [3], struct.pack('>3f', 1, -2, 3.5)))
write('idx', 'int32_empty', idx(0x0C, [0, 5], b''))
write('idx', 'float64_scalar', idx(0x0E, [], struct.pack('>d', 1.0)))
write('idx', 'short', idx(0x0B, [4], b'\x00\x01'))

rng = random.Random(23)
for target, count in (('import', 24), ('kernel', 48)):
    for i in range(count):
        write(target, 'seed_%02d' % i, bytes(rng.randrange(256) for _ in range(rng.choice((8, 24, 64, 160)))))


# The records target: a first byte choosing the format and compression (fuzz_records.cpp),
# then a file's bytes.
def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xa282ead8) & 0xFFFFFFFF


def tfrecord(*records):
    out = b''
    for r in records:
        length = struct.pack('<Q', len(r))
        out += length + struct.pack('<I', masked(crc32c(length))) + r + struct.pack('<I', masked(crc32c(r)))
    return out


import gzip
import zlib
write('records', 'tfrecord', bytes([0]) + tfrecord(b'hello', b'', b'x' * 40))
write('records', 'tfrecord_gzip', bytes([0 | 0x10]) + gzip.compress(tfrecord(b'ab', b'cd'), mtime=0))
write('records', 'tfrecord_zlib', bytes([0 | 0x20]) + zlib.compress(tfrecord(b'z')))
write('records', 'tfrecord_cut', bytes([0]) + tfrecord(b'hello', b'world')[:-6])
write('records', 'fixed', bytes([1 | (2 << 2) | 0x40]) + b'HDR' + bytes(range(24)) + b'F')
write('records', 'lines', bytes([2]) + b'id,name\r\n1,one\n2,"two, too"\n3,')
write('records', 'lines_gzip', bytes([2 | 0x10]) + gzip.compress(b'a\nb\n\nc', mtime=0))
write('records', 'whole', bytes([3]) + b'the whole file')


# The graph_def target: GraphDef bytes (fuzz_graph_def.cpp). The frozen TensorFlow graph
# protoc encoded (tests/data/frozen_tf.pb), cut, and a small loop-free graph encoded here.
def varint(v):
    out = b''
    v &= (1 << 64) - 1
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def field(number, payload):
    """A length-delimited field (wire type 2)."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def int_field(number, v):
    return varint(number << 3) + varint(v)


def attr(key, value):
    return field(5, field(1, key.encode()) + field(2, value))


def node(name, op, inputs=(), attrs=b''):
    return field(1, field(1, name.encode()) + field(2, op.encode()) + b''.join(field(3, i.encode()) for i in inputs) + attrs)


with open(os.path.join(os.path.dirname(here), '..', 'data', 'frozen_tf.pb'), 'rb') as f:
    frozen = f.read()
write('graph_def', 'frozen_tf', frozen)
write('graph_def', 'frozen_tf_cut', frozen[:len(frozen) // 2])
scalar_shape = field(7, b'')  # AttrValue.shape: a rank-0 TensorShapeProto
small = (node('x', 'Placeholder', attrs=attr('dtype', int_field(6, 1)) + attr('shape', scalar_shape)) +
         node('two', 'Const', attrs=attr('dtype', int_field(6, 1)) +
              attr('value', field(8, int_field(1, 1) + field(2, b'') + field(5, struct.pack('<f', 2.0))))) +
         node('y', 'Mul', ['x', 'two'], attr('T', int_field(6, 1))) +
         node('z', 'Identity', ['y:0', '^x'], attr('T', int_field(6, 1)) + attr('_class', field(1, field(2, b'loc:@y')))))
write('graph_def', 'small', small)

# The model target's seeds (corpus/model: a bundle with variables, its frozen form, and the
# first cut 5 bytes short) were written by save_model itself, from a 2x2 MatMul-ReLU graph
# with one variable and a signature: a bundle's bytes hold a GraphDef and a checkpoint, which
# this script does not rebuild.
