#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Checks a PNG that rsvg-convert made from a dtrain chart: its size, that it is not blank, and
that a curve's colour is in it. Decodes the PNG with zlib alone (no numpy or Pillow here).

Usage: check_png.py FILE.png WIDTH HEIGHT RRGGBB
"""
import struct
import sys
import zlib


def fail(message):
    print(f"dtrain: check_png.py: {message}", file=sys.stderr)
    sys.exit(1)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    if pa <= pb and pa <= pc:
        return a
    return b if pb <= pc else c


def decode(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        fail(f"{path} is not a PNG file")
    chunks, offset = {}, 8
    idat = b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IDAT":
            idat += body
        else:
            chunks.setdefault(kind, body)
        offset += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    channels = {2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace != 0:
        fail(f"{path}: depth {depth}, colour type {colour}, interlace {interlace}; "
             "expected 8-bit RGB or RGBA, not interlaced, as rsvg-convert writes")
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, previous, at = [], bytearray(stride), 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, up_left = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                line[i] = (line[i] + paeth(left, up, up_left)) & 0xFF
            elif kind != 0:
                fail(f"{path}: unknown row filter {kind}")
        rows.append(line)
        previous = line
    return width, height, channels, rows


def main():
    if len(sys.argv) != 5:
        fail("usage: check_png.py FILE.png WIDTH HEIGHT RRGGBB")
    path, want_width, want_height, colour = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    width, height, channels, rows = decode(path)
    if (width, height) != (want_width, want_height):
        fail(f"{path} is {width}x{height} pixels; the SVG says {want_width}x{want_height}")
    curve = tuple(int(colour[i:i + 2], 16) for i in (0, 2, 4))
    # Transparent pixels count as background: rsvg-convert leaves what the SVG does not paint.
    inked = curve_pixels = 0
    for line in rows:
        for x in range(width):
            pixel = tuple(line[x * channels:x * channels + 3])
            opaque = channels == 3 or line[x * channels + 3] > 0
            if opaque and pixel != (255, 255, 255):
                inked += 1
            if opaque and all(abs(a - b) <= 8 for a, b in zip(pixel, curve)):
                curve_pixels += 1
    share = inked / (width * height)
    print(f"{path}: {width}x{height}, {100 * share:.1f}% of the pixels inked, "
          f"{curve_pixels} in #{colour}")
    if share < 0.02:
        fail(f"{path} is blank: {100 * share:.2f}% of its pixels differ from white")
    if curve_pixels < 200:
        fail(f"{path} has {curve_pixels} pixels of the first curve's colour #{colour}; "
             "the curves are missing")


main()
