"""Writes tests/sacrebleu_fixture.json: what sacreBLEU itself answers on real
sentences, which tests/test_sacrebleu.cpp compares with eval/sacrebleu.cpp.

Usage: python3 sacrebleu_fixture.py CORPUS.tsv OUT.json     (writes the fixture)
       python3 sacrebleu_fixture.py CORPUS.tsv --check FILE (exit 0 when FILE
                                                             holds what this writes now)

CORPUS.tsv is ../shared/data/multi30k_en_de/valid.tsv (source TAB target). The
references are its first 300 German and 100 English lines; each hypothesis is a
copy changed at random (Python's random module, fixed seed, so the same on
every machine): words dropped, swapped, repeated or replaced, the sentence cut
short or extended, punctuation attached or detached, an HTML entity, a
number. The fixture holds the sentences themselves, so the test needs no corpus:
  "tokens":    each hypothesis's 13a tokens, as sacreBLEU's tokenizer gives them;
  "corpora":   groups of pairs with their corpus BLEU (BLEU().corpus_score), at
               full precision, and the signature;
  "sentences": every pair alone as a corpus of one, which reaches the smoothed
               and zero-score cases a whole corpus does not.
"""
import json
import random
import sys

import sacrebleu
from sacrebleu.metrics import BLEU
from sacrebleu.tokenizers.tokenizer_13a import Tokenizer13a

EXTRA_WORDS = ["the", "der", "und", "&quot;Hallo&quot;", "3.5", "1,000", "1990-2000", "(rot)", "well-known",
               "Straße", "café", "über", "e.g.", "'s", "$5", "&amp;", "a&lt;b", "--", "..."]


def perturb(rng, reference):
    words = reference.split()
    for _ in range(rng.randint(0, 4)):
        kind = rng.choice(["drop", "swap", "repeat", "replace", "insert", "detach", "attach"])
        if not words:
            words = [rng.choice(EXTRA_WORDS)]
        i = rng.randrange(len(words))
        if kind == "drop":
            del words[i]
        elif kind == "swap" and i + 1 < len(words):
            words[i], words[i + 1] = words[i + 1], words[i]
        elif kind == "repeat":
            words.insert(i, words[i])
        elif kind == "replace":
            words[i] = rng.choice(EXTRA_WORDS)
        elif kind == "insert":
            words.insert(i, rng.choice(EXTRA_WORDS))
        elif kind == "detach" and words[i][-1:] in (".", ","):
            words[i:i + 1] = [words[i][:-1], words[i][-1]]
        elif kind == "attach":
            words[i] += rng.choice([".", ",", "!", "?", ";", "\"", ")"])
    cut = rng.random()
    if cut < 0.1:
        words = words[:rng.randint(0, len(words))]
    return " ".join(words)


def build(corpus_path):
    with open(corpus_path, encoding="utf-8") as f:
        pairs = [line.rstrip("\n").split("\t") for line in f]
    references = [target for _, target in pairs[:300]] + [source for source, _ in pairs[300:400]]
    rng = random.Random(24)
    hypotheses = [perturb(rng, r) for r in references]
    hypotheses[0] = ""  # an empty hypothesis within a corpus
    tokenizer = Tokenizer13a()
    bleu = BLEU()
    corpora = []
    for name, lo, hi in [("german", 0, 300), ("english", 300, 400), ("all", 0, 400)]:
        corpora.append({"name": name, "first": lo, "end": hi,
                        "bleu": bleu.corpus_score(hypotheses[lo:hi], [references[lo:hi]]).score})
    sentences = [bleu.corpus_score([h], [[r]]).score for h, r in zip(hypotheses, references)]
    return {
        "sacrebleu_version": sacrebleu.__version__,
        "signature": str(bleu.get_signature()),
        "hypotheses": hypotheses,
        "references": references,
        "tokens": [tokenizer(h.rstrip()).split() for h in hypotheses],
        "corpora": corpora,
        "sentences": sentences,
    }


def main():
    fixture = json.dumps(build(sys.argv[1]), ensure_ascii=False, indent=0) + "\n"
    if sys.argv[2] == "--check":
        with open(sys.argv[3], encoding="utf-8") as f:
            sys.exit(0 if f.read() == fixture else 1)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write(fixture)


if __name__ == "__main__":
    main()
