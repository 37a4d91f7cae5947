#!/usr/bin/env python3
"""Writes data/demo_corpus.txt: procedurally generated English-like stories for the byte-level
demo. The text is ours (no third-party copyright), varied enough to be interesting and regular
enough that a small model learns spelling, grammar and simple facts in a few CPU minutes.

Deterministic: python3 data/make_demo_corpus.py regenerates the shipped file byte for byte."""
import random
import sys

NAMES = ["Ada", "Ben", "Cora", "Dev", "Elin", "Finn", "Greta", "Hugo", "Iris", "Jonas", "Kira",
         "Leo", "Mira", "Nils", "Olga", "Pablo", "Rosa", "Sami", "Tove", "Umar", "Vera", "Wim"]
ANIMALS = ["fox", "owl", "cat", "dog", "goat", "heron", "badger", "otter", "crow", "horse", "mouse",
           "rabbit"]
PLACES = ["the old mill", "the harbour", "the market", "the forest", "the library", "the hill",
          "the river bank", "the bakery", "the garden", "the station", "the lighthouse", "the farm"]
OBJECTS = ["a red kite", "a small boat", "a blue lamp", "an old map", "a loaf of bread", "a letter",
           "a wooden box", "a silver key", "a basket of apples", "a warm coat", "a clock", "a drum"]
ADJECTIVES = ["quiet", "bright", "cold", "windy", "golden", "grey", "sunny", "misty", "calm", "long"]
TIMES = ["In the morning", "At noon", "In the evening", "Late at night", "Before dawn",
         "After lunch", "On Sunday", "On a rainy day", "In the spring", "At the end of summer"]
VERBS = [("found", "find"), ("carried", "carry"), ("painted", "paint"), ("lost", "lose"),
         ("mended", "mend"), ("sold", "sell"), ("hid", "hide"), ("shared", "share")]
FEELINGS = ["happy", "tired", "curious", "worried", "proud", "hungry", "surprised", "calm"]
SAYINGS = ["A kind word costs nothing.", "Slow steps still reach the hill.",
           "Every river finds the sea.", "Count the apples before you sell the basket.",
           "A lamp is small, but the night is patient.", "Share the bread and the road is short."]
NUMBERS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
           "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
           "eighteen", "nineteen", "twenty"]


def a_or_an(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def story(rng, number):
    hero, friend = rng.sample(NAMES, 2)
    animal = rng.choice(ANIMALS)
    place, other_place = rng.sample(PLACES, 2)
    thing = rng.choice(OBJECTS)
    past, present = rng.choice(VERBS)
    feeling = rng.choice(FEELINGS)
    a, b = rng.randint(0, 10), rng.randint(0, 10)
    lines = [
        f"Story {number}: {hero} and the {animal}",
        "",
        f"{rng.choice(TIMES)}, {hero} walked to {place}. The day was {rng.choice(ADJECTIVES)}.",
        f"There {hero} met {a_or_an(animal)} who had {thing}.",
        f"\"Where did you get {thing}?\" asked {hero}.",
        f"\"I {past} it near {other_place},\" said the {animal}.",
        f"{hero} felt {feeling}. {hero} went to find {friend}.",
        f"{friend} said, \"We can {present} it together.\"",
        f"They had {NUMBERS[a]} apples and {NUMBERS[b]} pears, so they had {NUMBERS[a + b]} "
        f"pieces of fruit in all.",
    ]
    if rng.random() < 0.5:
        lines.append(f"The {animal} stayed with them until the sky was {rng.choice(ADJECTIVES)}.")
    else:
        lines.append(f"The {animal} ran back to {other_place} and did not return.")
    lines += [f"That night {hero} wrote: {rng.choice(SAYINGS)}", "", ""]
    return "\n".join(lines)


def main(path, target_bytes=200_000):
    rng = random.Random(20240520)
    parts, size, number = [], 0, 1
    while size < target_bytes:
        text = story(rng, number)
        parts.append(text)
        size += len(text)
        number += 1
    with open(path, "w", encoding="ascii", newline="\n") as out:
        out.write("".join(parts))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "data/demo_corpus.txt")
