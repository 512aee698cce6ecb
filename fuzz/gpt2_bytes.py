"""GPT-2's bytes_to_unicode (openai/gpt-2 encoder.py): printable Latin-1 bytes map to themselves,
the other 68 to U+0100.. in byte order. Shared by make_seeds.py and tests/hostile/make_hostile.py."""


def b2u():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}
