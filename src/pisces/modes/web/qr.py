"""A small QR code encoder (ISO/IEC 18004) for the pairing link: byte mode, error correction level L,
versions 1 to 10 (up to 271 bytes), the mask with the lowest penalty; and its rendering for a terminal.

Written for pisces (no dependency; ~30 ms for a pairing link, most of it choosing the mask); loaded only by
the web mode, when it listens on the network. ``matrix(text)`` is the modules (True = dark), ``terminal(text)``
two rows per line in half blocks, light modules drawn (a terminal's background is usually dark), with a quiet
zone. Text too long for version 10 raises ValueError.
"""

from __future__ import annotations

# version -> (error correction codewords per block, [(blocks, data codewords per block), ...]) at level L
_BLOCKS = {1: (7, [(1, 19)]), 2: (10, [(1, 34)]), 3: (15, [(1, 55)]), 4: (20, [(1, 80)]), 5: (26, [(1, 108)]),
           6: (18, [(2, 68)]), 7: (20, [(2, 78)]), 8: (24, [(2, 97)]), 9: (30, [(2, 116)]),
           10: (18, [(2, 68), (2, 69)])}
_ALIGN = {1: [], 2: [6, 18], 3: [6, 22], 4: [6, 26], 5: [6, 30], 6: [6, 34], 7: [6, 22, 38], 8: [6, 24, 42],
          9: [6, 26, 46], 10: [6, 28, 50]}
_ECL_L = 1  # the format bits of level L


def _gf_mul(x: int, y: int) -> int:
    z = 0
    for i in reversed(range(8)):
        z = (z << 1) ^ ((z >> 7) * 0x11D)
        z ^= ((y >> i) & 1) * x
    return z


def _rs_divisor(degree: int) -> list[int]:
    result = [0] * (degree - 1) + [1]
    root = 1
    for _ in range(degree):
        for j in range(degree):
            result[j] = _gf_mul(result[j], root)
            if j + 1 < degree:
                result[j] ^= result[j + 1]
        root = _gf_mul(root, 0x02)
    return result


def _rs_remainder(data: list[int], divisor: list[int]) -> list[int]:
    result = [0] * len(divisor)
    for b in data:
        factor = b ^ result.pop(0)
        result.append(0)
        for i, coef in enumerate(divisor):
            result[i] ^= _gf_mul(coef, factor)
    return result


def _codewords(data: bytes) -> tuple[int, list[int]]:
    """(version, the interleaved data and error correction codewords)."""
    for version, (_, groups) in _BLOCKS.items():
        capacity = sum(n * k for n, k in groups)
        count_bits = 8 if version < 10 else 16
        if 4 + count_bits + 8 * len(data) <= capacity * 8:
            break
    else:
        raise ValueError(f"too long for a QR code of version 10 ({len(data)} bytes)")
    ec_len = _BLOCKS[version][0]
    bits = [0, 1, 0, 0] + [(len(data) >> i) & 1 for i in reversed(range(count_bits))]
    for byte in data:
        bits += [(byte >> i) & 1 for i in reversed(range(8))]
    bits += [0] * min(4, capacity * 8 - len(bits))
    bits += [0] * (-len(bits) % 8)
    words = [int("".join(map(str, bits[i:i + 8])), 2) for i in range(0, len(bits), 8)]
    pad = 0xEC
    while len(words) < capacity:
        words.append(pad)
        pad ^= 0xEC ^ 0x11
    blocks, at = [], 0
    for n, k in groups:
        for _ in range(n):
            blocks.append(words[at:at + k])
            at += k
    divisor = _rs_divisor(ec_len)
    ecs = [_rs_remainder(b, divisor) for b in blocks]
    out = [b[i] for i in range(max(len(b) for b in blocks)) for b in blocks if i < len(b)]
    out += [e[i] for i in range(ec_len) for e in ecs]
    return version, out


class _Grid:
    def __init__(self, version: int) -> None:
        self.size = size = version * 4 + 17
        self.dark = [[False] * size for _ in range(size)]
        self.function = [[False] * size for _ in range(size)]
        for i in range(size):  # timing patterns
            self.set(6, i, i % 2 == 0)
            self.set(i, 6, i % 2 == 0)
        for cx, cy in ((3, 3), (size - 4, 3), (3, size - 4)):  # finder patterns with their separators
            for dy in range(-4, 5):
                for dx in range(-4, 5):
                    x, y = cx + dx, cy + dy
                    if 0 <= x < size and 0 <= y < size:
                        self.set(x, y, max(abs(dx), abs(dy)) not in (2, 4))
        pos = _ALIGN[version]
        last = len(pos) - 1
        for i, cx in enumerate(pos):
            for j, cy in enumerate(pos):
                if (i, j) in ((0, 0), (0, last), (last, 0)):
                    continue
                for dy in range(-2, 3):
                    for dx in range(-2, 3):
                        self.set(cx + dx, cy + dy, max(abs(dx), abs(dy)) != 1)
        self.format_bits(0)  # reserve the format areas; drawn for real with the chosen mask
        if version >= 7:
            rem = version
            for _ in range(12):
                rem = (rem << 1) ^ ((rem >> 11) * 0x1F25)
            bits = version << 12 | rem
            for i in range(18):
                bit = (bits >> i) & 1 == 1
                a, b = size - 11 + i % 3, i // 3
                self.set(a, b, bit)
                self.set(b, a, bit)

    def set(self, x: int, y: int, dark: bool) -> None:
        self.dark[y][x] = dark
        self.function[y][x] = True

    def format_bits(self, mask: int) -> None:
        data = _ECL_L << 3 | mask
        rem = data
        for _ in range(10):
            rem = (rem << 1) ^ ((rem >> 9) * 0x537)
        bits = (data << 10 | rem) ^ 0x5412
        size = self.size

        def bit(i: int) -> bool:
            return (bits >> i) & 1 == 1
        for i in range(6):
            self.set(8, i, bit(i))
        self.set(8, 7, bit(6))
        self.set(8, 8, bit(7))
        self.set(7, 8, bit(8))
        for i in range(9, 15):
            self.set(14 - i, 8, bit(i))
        for i in range(8):
            self.set(size - 1 - i, 8, bit(i))
        for i in range(8, 15):
            self.set(8, size - 15 + i, bit(i))
        self.set(8, size - 8, True)

    def place(self, words: list[int]) -> None:
        size, i, total = self.size, 0, len(words) * 8
        right = size - 1
        while right >= 1:
            if right == 6:
                right = 5
            for vert in range(size):
                for j in range(2):
                    x = right - j
                    y = size - 1 - vert if ((right + 1) & 2) == 0 else vert
                    if not self.function[y][x] and i < total:
                        self.dark[y][x] = (words[i >> 3] >> (7 - (i & 7))) & 1 == 1
                        i += 1
            right -= 2

    def apply_mask(self, mask: int) -> None:
        rule = _MASKS[mask]
        for y in range(self.size):
            row, fn = self.dark[y], self.function[y]
            for x in range(self.size):
                if not fn[x] and rule(x, y):
                    row[x] = not row[x]

    def penalty(self) -> int:
        size, dark, score = self.size, self.dark, 0
        lines = dark + [[dark[y][x] for y in range(size)] for x in range(size)]
        for line in lines:  # runs of five or more, and finder-like patterns
            run, prev = 0, None
            for v in line:
                run = run + 1 if v == prev else 1
                prev = v
                if run == 5:
                    score += 3
                elif run > 5:
                    score += 1
            text = "".join("1" if v else "0" for v in line)
            score += 40 * (text.count("10111010000") + text.count("00001011101"))
        for y in range(size - 1):  # 2x2 blocks of one colour
            for x in range(size - 1):
                if dark[y][x] == dark[y][x + 1] == dark[y + 1][x] == dark[y + 1][x + 1]:
                    score += 3
        total = size * size
        black = sum(map(sum, dark))
        score += 10 * ((abs(black * 20 - total * 10) + total - 1) // total - 1)
        return score


_MASKS = (lambda x, y: (x + y) % 2 == 0, lambda x, y: y % 2 == 0, lambda x, y: x % 3 == 0,
          lambda x, y: (x + y) % 3 == 0, lambda x, y: (x // 3 + y // 2) % 2 == 0,
          lambda x, y: x * y % 2 + x * y % 3 == 0, lambda x, y: (x * y % 2 + x * y % 3) % 2 == 0,
          lambda x, y: ((x + y) % 2 + x * y % 3) % 2 == 0)


def matrix(text: str) -> list[list[bool]]:
    """The QR code of ``text`` (UTF-8, byte mode, level L): rows of modules, True = dark, no quiet zone."""
    version, words = _codewords(text.encode("utf-8"))
    grid = _Grid(version)
    grid.place(words)
    best, best_score = 0, None
    for mask in range(8):
        grid.apply_mask(mask)
        grid.format_bits(mask)
        score = grid.penalty()
        if best_score is None or score < best_score:
            best, best_score = mask, score
        grid.apply_mask(mask)  # undo (XOR)
    grid.apply_mask(best)
    grid.format_bits(best)
    return grid.dark


def terminal(text: str, quiet: int = 2) -> str:
    """The QR code of ``text`` for a terminal: light modules as blocks (so a dark background shows the dark
    ones), two module rows per line with half blocks, ``quiet`` light modules around it."""
    m = matrix(text)
    n = len(m) + 2 * quiet
    light = [[True] * n for _ in range(n)]
    for y, row in enumerate(m):
        for x, v in enumerate(row):
            light[y + quiet][x + quiet] = not v
    if n % 2:
        light.append([True] * n)
    chars = {(True, True): "\u2588", (True, False): "\u2580", (False, True): "\u2584", (False, False): " "}
    return "\n".join("".join(chars[(light[y][x], light[y + 1][x])] for x in range(n))
                     for y in range(0, len(light), 2))
