#!/usr/bin/env python3
"""Builds stories260k_endings.jsonl, the demo's task file for the task gates.

Usage: python3 make_stories260k_endings.py ../../../shared/data/tinystories_val.txt \
           > stories260k_endings.jsonl
       (add --generation_candidates to print every generation candidate
       instead; see GENERATION_KEEP.)

Deterministic (fixed seed, fixed paragraph range): the same input gives the
same bytes. Only the build uses Python; the service reads the JSONL.

story_endings (multiple choice): paragraphs of TinyStories' validation split
from PARAGRAPHS_FROM on (clear of the first paragraphs that calibration and
perplexity checks use). prompt = the paragraph's first sentences (at least
one, until the prompt is at least MIN_PROMPT_CHARS long), choices = [the true
next sentence, the sentence at the same place of another paragraph drawn at
random], in an order drawn at random (seed SEED).

story_words (generation): prompt = a paragraph cut a few words into a
sentence, target = the paragraph's next words up to the sentence's end. The
float stories260K model's greedy continuation matched the real text on the
candidates listed in GENERATION_KEEP (found by evaluating the candidates'
file, --generation_candidates, with core/eval/task_evaluation on the float
model). They are therefore easy for the float model by construction: the
gate compares a packed model with its reference on them, a relative check.
"""

import json
import random
import re
import sys

SEED = 21
PARAGRAPHS_FROM = 3000
CHOICE_ITEMS = 60
MIN_PROMPT_CHARS = 80
MAX_PROMPT_CHARS = 400
MAX_SENTENCE_CHARS = 150
GENERATION_FROM = 3800
GENERATION_CANDIDATES = 200
TARGET_WORDS = 2
# Indices into the generation candidates that the float model continues
# exactly as the text does (see the module docstring).
GENERATION_KEEP = [4, 41, 52, 56, 57, 100, 104, 140, 185, 189]

SENTENCE_END = re.compile(r'(?<=[.!?])\s+(?=[A-Z"])')


def paragraphs(path):
    with open(path, encoding='utf-8') as f:
        text = f.read()
    return [p.strip() for p in re.split(r'\n\s*\n', text) if p.strip()]


def sentences(paragraph):
    return [s.strip() for s in SENTENCE_END.split(paragraph) if s.strip()]


def usable(parts):
    # Plain sentences: no quotes (a split inside dialogue reads badly) and
    # none too long.
    return all('"' not in s and len(s) <= MAX_SENTENCE_CHARS for s in parts)


def prompt_length(parts):
    """Sentences in the prompt, or 0 when the paragraph is too short."""
    for k in range(1, len(parts)):
        prompt = ' '.join(parts[:k])
        if len(prompt) > MAX_PROMPT_CHARS:
            return 0
        if len(prompt) >= MIN_PROMPT_CHARS:
            return k
    return 0


def choice_items(paras, rng):
    candidates = []
    for index in range(PARAGRAPHS_FROM, len(paras)):
        parts = sentences(paras[index])
        if len(parts) < 3 or not usable(parts):
            continue
        k = prompt_length(parts)
        if k:
            candidates.append((index, parts, k))
        if len(candidates) == CHOICE_ITEMS:
            break
    items = []
    for n, (index, parts, k) in enumerate(candidates):
        true_next = parts[k]
        while True:
            other = rng.choice(candidates)
            if other[0] != index:
                break
        other_parts = other[1]
        distractor = other_parts[min(k, len(other_parts) - 1)]
        choices = [' ' + true_next, ' ' + distractor]
        answer = rng.randrange(2)
        if answer == 1:
            choices.reverse()
        items.append({
            'id': 'ending-%02d' % n,
            'task': 'story_endings',
            'prompt': ' '.join(parts[:k]),
            'choices': choices,
            'answer': answer,
        })
    return items


def generation_candidates(paras):
    items = []
    for index in range(GENERATION_FROM, len(paras)):
        parts = sentences(paras[index])
        if len(parts) < 2 or not usable(parts):
            continue
        # The second sentence, cut before its last TARGET_WORDS words.
        words = parts[1].split(' ')
        if len(words) < 6:
            continue
        prompt = parts[0] + ' ' + ' '.join(words[:-TARGET_WORDS])
        target = ' ' + ' '.join(words[-TARGET_WORDS:])
        items.append({
            'id': 'words-%03d' % len(items),
            'task': 'story_words',
            'prompt': prompt,
            'target': target,
        })
        if len(items) == GENERATION_CANDIDATES:
            break
    return items


def main(argv):
    args = [a for a in argv[1:] if not a.startswith('--')]
    if len(args) != 1:
        sys.exit(__doc__)
    paras = paragraphs(args[0])
    candidates = generation_candidates(paras)
    if '--generation_candidates' in argv:
        items = candidates
    else:
        items = choice_items(paras, random.Random(SEED))
        items += [candidates[i] for i in GENERATION_KEEP]
    for item in items:
        sys.stdout.write(json.dumps(item, ensure_ascii=False) + '\n')


if __name__ == '__main__':
    main(sys.argv)
