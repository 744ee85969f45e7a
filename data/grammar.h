// The `grammar` toy task: a small English -> Italian phrase grammar.
//   "the black cats eat the small fish" -> "i gatti neri mangiano il pesce piccolo"
// What the model has to learn: Italian articles chosen by gender, number and
// the next word's first sounds (il / lo / l' / la / i / gli / le, un / uno /
// una / un'), adjectives placed after the noun and agreeing with it, verbs
// agreeing with the subject's person and number, possessives taking the
// article ("my friends" -> "i miei amici"), and prepositions merging with the
// article ("in the garden" -> "nel giardino", "near the island" -> "vicino
// all'isola"). Sentences are lower case without final punctuation (except "I").
//
// Sentences are described with English lemmas and rendered into both
// languages, so tests can write a sentence down and check its translation.
#pragma once
#include <optional>
#include <string>

#include "base/random.h"
#include "corpus.h"

namespace sf::data::grammar {

struct NounPhrase {
  std::string determiner = "the";  // the | a (singular only) | this (plural "these") | my
  std::string adjective;           // "" for none; English lemma
  std::string noun;                // English singular
  bool plural = false;

  NounPhrase() = default;
  NounPhrase(std::string determiner, std::string adjective, std::string noun, bool plural = false)
      : determiner(std::move(determiner)), adjective(std::move(adjective)), noun(std::move(noun)),
        plural(plural) {}
};

struct Sentence {
  std::string pronoun;  // I | you | he | she | we | they; "" when the subject is `subject`
  NounPhrase subject;
  std::string verb;                  // English base form; "be" takes `adjective`
  std::optional<NounPhrase> object;  // for transitive verbs
  std::string adjective;             // the predicate of "be"
  std::string preposition;           // "" | in | on | near | with | under | without
  NounPhrase place;                  // the object of the preposition
};

// Both sides of the sentence. Throws sf::InternalError for a word not in the lexicon or
// a sentence the grammar does not cover (e.g. "a" with a plural, "be" with a
// subject of unknown gender such as "I").
Pair render(const Sentence& sentence);

Sentence sample_sentence(Rng& rng);
Pair sample_pair(Rng& rng);

// Entries of the English lexicon: nouns, adjectives, verbs (with "be"),
// pronouns, prepositions and determiners.
int lexicon_size();

}  // namespace sf::data::grammar
