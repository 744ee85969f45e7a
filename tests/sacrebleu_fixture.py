"""Writes tests/sacrebleu_fixture.json: what sacreBLEU and Moses' Perl scripts
themselves answer on real sentences, which tests/test_sacrebleu.cpp and
tests/test_moses_tokenizer.cpp compare with eval/sacrebleu.cpp and
eval/moses_tokenizer.cpp.

Usage: python3 sacrebleu_fixture.py DATA MOSES OUT.json     (writes the fixture)
       python3 sacrebleu_fixture.py DATA MOSES --check FILE (exit 0 when FILE
                                                             holds what this writes now)

DATA is ../shared/data (the real corpora: multi30k_en_de/valid.tsv and
tatoeba_en_es/valid.tsv, source TAB target). MOSES is the folder
scripts/moses-3a0631a of multi30k/dataset, the Moses snapshot Multi30k's
lc.norm.tok files were made with (commit a3d2e0d26b56f3846f66a952536ffed4e401d05a
of github.com/multi30k/dataset); the tokenizer runs on Perl (5.36 here).
sacreBLEU is 2.6.0 (tag v2.6.0, commit 2277caccfc7b956671a6a09f1646f62250034157 of
github.com/mjpost/sacrebleu) from a checkout: `git archive v2.6.0 | tar -x -C
DIR`, `echo '__version__ = "2.6.0"' > DIR/sacrebleu/version.py` (the release
writes that file when it is built), then PYTHONPATH=DIR with Debian's Python
3.11 and its packages python3-regex python3-tabulate python3-numpy
python3-colorama python3-lxml python3-portalocker.

The references are the first 300 German and 100 English lines of
multi30k_en_de/valid.tsv; each hypothesis is a copy changed at random (Python's
random module, fixed seed, so the same on every machine): words dropped,
swapped, repeated or replaced, the sentence cut short or extended, punctuation
attached or detached, an HTML entity, a number. The fixture holds those
sentences themselves, so that part of the test needs no corpus:
  "tokens":    each hypothesis's 13a tokens, as sacreBLEU's tokenizer gives them;
  "corpora":   groups of pairs with their corpus BLEU (BLEU().corpus_score), at
               full precision, and the signature;
  "sentences": every pair alone as a corpus of one, which reaches the smoothed
               and zero-score cases a whole corpus does not;
  "lowercase": the same with BLEU(lowercase=True) (sacrebleu -lc);
  "moses":     the Multi30k papers' convention, lowercase.perl |
               normalize-punctuation.perl -l LANG | tokenizer.perl -l LANG (de
               for the German pairs, en for the English): the tokens of each
               hypothesis and reference as a hash (32-bit FNV-1a of the tokens
               joined by spaces, to keep this file small), corpus BLEU with BLEU(tokenize="none",
               smooth_method="none") on those tokens, and the hash of the
               tokens of every line of the real validation references (German
               and Spanish), which the test tokenizes from DATA. The script
               checks that tokenizer.perl's escaping (&apos; &quot; ...) leaves
               the BLEU unchanged, and records the lines whose tokens Moses'
               own nonbreaking-prefix lists change (where our lists matter).
multi-bleu.perl (scripts/generic of github.com/moses-smt/mosesdecoder, commit
34452895f350bf097b21ee514a529a1dc542243c) on the scripts' tokens of the German
and English pairs prints 72.04 and 68.96, the "german" and "english" BLEU here
to its two decimals.
"""
import json
import os
import random
import subprocess
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


def fnv1a(text):
    """FNV-1a (32 bits) of the UTF-8 bytes, as 8 hex digits."""
    h = 0x811C9DC5
    for byte in text.encode("utf-8"):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return f"{h:08x}"


def hashes(lines):
    return " ".join(fnv1a(line) for line in lines)


def moses_lines(moses, lines, language, *extra):
    """The Multi30k pipeline on `lines`: one string of tokens per line."""
    tokenizer = os.path.join(moses, "tokenizer")
    text = "".join(line + "\n" for line in lines).encode("utf-8")
    for script, args in [("lowercase.perl", []), ("normalize-punctuation.perl", ["-l", language]),
                         ("tokenizer.perl", ["-l", language, "-q", *extra])]:
        text = subprocess.run(["perl", os.path.join(tokenizer, script), *args], input=text,
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=True).stdout
    out = [" ".join(line.split()) for line in text.decode("utf-8").split("\n")[:-1]]
    assert len(out) == len(lines)
    return out


def without_prefixes(moses, scratch):
    """A copy of the Moses folder whose nonbreaking-prefix lists are empty."""
    copy = os.path.join(scratch, "moses-no-prefixes")
    subprocess.run(["cp", "-a", moses, copy], check=True)
    folder = os.path.join(copy, "share", "nonbreaking_prefixes")
    for name in os.listdir(folder):
        if name.startswith("nonbreaking_prefix."):
            open(os.path.join(folder, name), "w").close()
    return copy


def targets(path):
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n").split("\t")[1] for line in f]


def build_moses(data, moses, hypotheses, references):
    import tempfile
    groups = [("german", 0, 300, "de"), ("german_a", 0, 150, "de"), ("german_b", 150, 300, "de"),
              ("english", 300, 400, "en")]
    hyp_tokens, ref_tokens = [], []
    for _, lo, hi, language in groups:
        if _ in ("german", "english"):
            hyp_tokens += moses_lines(moses, hypotheses[lo:hi], language)
            ref_tokens += moses_lines(moses, references[lo:hi], language)
    # lowercase=True changes nothing on lowercase text; it makes the signature
    # say what was compared (case:lc).
    bleu = BLEU(tokenize="none", smooth_method="none", lowercase=True, force=True)
    cased = BLEU(tokenize="none", smooth_method="none", force=True)
    corpora = []
    for name, lo, hi, language in groups:
        score = bleu.corpus_score(hyp_tokens[lo:hi], [ref_tokens[lo:hi]]).score
        # Escaping maps characters to entities one for one, inside words: the
        # same words match, so BLEU cannot change. Checked, not assumed:
        plain_hyp = moses_lines(moses, hypotheses[lo:hi], language, "-no-escape")
        plain_ref = moses_lines(moses, references[lo:hi], language, "-no-escape")
        assert bleu.corpus_score(plain_hyp, [plain_ref]).score == score, name
        assert cased.corpus_score(hyp_tokens[lo:hi], [ref_tokens[lo:hi]]).score == score, name
        corpora.append({"name": name, "first": lo, "end": hi, "language": language, "bleu": score})
    real = []
    with tempfile.TemporaryDirectory() as scratch:
        bare = without_prefixes(moses, scratch)
        for path, language in [("multi30k_en_de/valid.tsv", "de"), ("tatoeba_en_es/valid.tsv", "es")]:
            lines = targets(os.path.join(data, path))
            tokens = moses_lines(moses, lines, language)
            bare_tokens = moses_lines(bare, lines, language)
            real.append({"path": path, "language": language, "lines": len(lines),
                         "hashes": hashes(tokens),
                         "prefixes_matter": [t for t, b in zip(tokens, bare_tokens) if t != b]})
    return {
        "signature": str(bleu.get_signature()),
        "hypothesis_hashes": hashes(hyp_tokens),
        "reference_hashes": hashes(ref_tokens),
        "corpora": corpora,
        "real": real,
    }


def build_lowercase(hypotheses, references):
    bleu = BLEU(lowercase=True)
    corpora = [{"name": name, "first": lo, "end": hi,
                "bleu": bleu.corpus_score(hypotheses[lo:hi], [references[lo:hi]]).score}
               for name, lo, hi in [("german", 0, 300), ("english", 300, 400), ("all", 0, 400)]]
    return {
        "signature": str(bleu.get_signature()),
        "corpora": corpora,
        "sentences": [bleu.corpus_score([h], [[r]]).score for h, r in zip(hypotheses, references)],
    }


def main():
    data, moses = sys.argv[1], sys.argv[2]
    fixture = build(os.path.join(data, "multi30k_en_de", "valid.tsv"))
    fixture["lowercase"] = build_lowercase(fixture["hypotheses"], fixture["references"])
    fixture["moses"] = build_moses(data, moses, fixture["hypotheses"], fixture["references"])
    text = json.dumps(fixture, ensure_ascii=False, indent=0) + "\n"
    if sys.argv[3] == "--check":
        with open(sys.argv[4], encoding="utf-8") as f:
            sys.exit(0 if f.read() == text else 1)
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
