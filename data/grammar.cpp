#include "grammar.h"

#include <array>
#include <string_view>
#include <vector>

#include "base/error.h"

namespace sf::data::grammar {

namespace {

enum class Gender { Masculine, Feminine };

// English plural "" = the noun is only used in the singular ("fish" would be
// ambiguous). Italian forms are written out: plurals are too irregular to derive.
struct Noun {
  const char *en, *en_plural, *it, *it_plural;
  Gender gender;
  bool animate;  // may be the subject of an action verb
};

// Italian forms: masculine singular, feminine singular, masculine plural, feminine plural.
struct Adjective {
  const char* en;
  std::array<const char*, 4> it;
};

// Italian present tense: io, tu, lui/lei, noi, voi, loro.
struct Verb {
  const char *en, *en_3sg;
  std::array<const char*, 6> it;
  bool transitive;
};

constexpr Gender M = Gender::Masculine, F = Gender::Feminine;

const Noun kNouns[] = {
    {"cat", "cats", "gatto", "gatti", M, true},
    {"dog", "dogs", "cane", "cani", M, true},
    {"man", "men", "uomo", "uomini", M, true},
    {"woman", "women", "donna", "donne", F, true},
    {"child", "children", "bambino", "bambini", M, true},
    {"boy", "boys", "ragazzo", "ragazzi", M, true},
    {"girl", "girls", "ragazza", "ragazze", F, true},
    {"friend", "friends", "amico", "amici", M, true},
    {"student", "students", "studente", "studenti", M, true},
    {"teacher", "teachers", "maestro", "maestri", M, true},
    {"horse", "horses", "cavallo", "cavalli", M, true},
    {"bird", "birds", "uccello", "uccelli", M, true},
    {"fish", "", "pesce", "pesci", M, false},
    {"book", "books", "libro", "libri", M, false},
    {"table", "tables", "tavolo", "tavoli", M, false},
    {"house", "houses", "casa", "case", F, false},
    {"apple", "apples", "mela", "mele", F, false},
    {"orange", "oranges", "arancia", "arance", F, false},
    {"tree", "trees", "albero", "alberi", M, false},
    {"garden", "gardens", "giardino", "giardini", M, false},
    {"car", "cars", "macchina", "macchine", F, false},
    {"door", "doors", "porta", "porte", F, false},
    {"window", "windows", "finestra", "finestre", F, false},
    {"chair", "chairs", "sedia", "sedie", F, false},
    {"letter", "letters", "lettera", "lettere", F, false},
    {"key", "keys", "chiave", "chiavi", F, false},
    {"flower", "flowers", "fiore", "fiori", M, false},
    {"river", "rivers", "fiume", "fiumi", M, false},
    {"island", "islands", "isola", "isole", F, false},
    {"backpack", "backpacks", "zaino", "zaini", M, false},
    {"mirror", "mirrors", "specchio", "specchi", M, false},
    {"box", "boxes", "scatola", "scatole", F, false},
    {"bottle", "bottles", "bottiglia", "bottiglie", F, false},
    {"city", "cities", "città", "città", F, false},
};

const Adjective kAdjectives[] = {
    {"black", {"nero", "nera", "neri", "nere"}},
    {"white", {"bianco", "bianca", "bianchi", "bianche"}},
    {"red", {"rosso", "rossa", "rossi", "rosse"}},
    {"green", {"verde", "verde", "verdi", "verdi"}},
    {"yellow", {"giallo", "gialla", "gialli", "gialle"}},
    {"small", {"piccolo", "piccola", "piccoli", "piccole"}},
    {"big", {"grande", "grande", "grandi", "grandi"}},
    {"old", {"vecchio", "vecchia", "vecchi", "vecchie"}},
    {"new", {"nuovo", "nuova", "nuovi", "nuove"}},
    {"young", {"giovane", "giovane", "giovani", "giovani"}},
    {"beautiful", {"bello", "bella", "belli", "belle"}},
    {"happy", {"felice", "felice", "felici", "felici"}},
    {"sad", {"triste", "triste", "tristi", "tristi"}},
    {"long", {"lungo", "lunga", "lunghi", "lunghe"}},
    {"tall", {"alto", "alta", "alti", "alte"}},
    {"clean", {"pulito", "pulita", "puliti", "pulite"}},
    {"dirty", {"sporco", "sporca", "sporchi", "sporche"}},
    {"tired", {"stanco", "stanca", "stanchi", "stanche"}},
};

const Verb kBe = {"be", "is", {"sono", "sei", "è", "siamo", "siete", "sono"}, false};

const Verb kVerbs[] = {
    {"eat", "eats", {"mangio", "mangi", "mangia", "mangiamo", "mangiate", "mangiano"}, true},
    {"see", "sees", {"vedo", "vedi", "vede", "vediamo", "vedete", "vedono"}, true},
    {"want", "wants", {"voglio", "vuoi", "vuole", "vogliamo", "volete", "vogliono"}, true},
    {"have", "has", {"ho", "hai", "ha", "abbiamo", "avete", "hanno"}, true},
    {"love", "loves", {"amo", "ami", "ama", "amiamo", "amate", "amano"}, true},
    {"find", "finds", {"trovo", "trovi", "trova", "troviamo", "trovate", "trovano"}, true},
    {"take", "takes", {"prendo", "prendi", "prende", "prendiamo", "prendete", "prendono"}, true},
    {"read", "reads", {"leggo", "leggi", "legge", "leggiamo", "leggete", "leggono"}, true},
    {"buy", "buys", {"compro", "compri", "compra", "compriamo", "comprate", "comprano"}, true},
    {"watch", "watches", {"guardo", "guardi", "guarda", "guardiamo", "guardate", "guardano"}, true},
    {"open", "opens", {"apro", "apri", "apre", "apriamo", "aprite", "aprono"}, true},
    {"close", "closes", {"chiudo", "chiudi", "chiude", "chiudiamo", "chiudete", "chiudono"}, true},
    {"wash", "washes", {"lavo", "lavi", "lava", "laviamo", "lavate", "lavano"}, true},
    {"carry", "carries", {"porto", "porti", "porta", "portiamo", "portate", "portano"}, true},
    {"sleep", "sleeps", {"dormo", "dormi", "dorme", "dormiamo", "dormite", "dormono"}, false},
    {"run", "runs", {"corro", "corri", "corre", "corriamo", "correte", "corrono"}, false},
    {"walk", "walks", {"cammino", "cammini", "cammina", "camminiamo", "camminate", "camminano"}, false},
    {"live", "lives", {"vivo", "vivi", "vive", "viviamo", "vivete", "vivono"}, false},
    {"play", "plays", {"gioco", "giochi", "gioca", "giochiamo", "giocate", "giocano"}, false},
    {"work", "works", {"lavoro", "lavori", "lavora", "lavoriamo", "lavorate", "lavorano"}, false},
    {"sing", "sings", {"canto", "canti", "canta", "cantiamo", "cantate", "cantano"}, false},
    {"wait", "waits", {"aspetto", "aspetti", "aspetta", "aspettiamo", "aspettate", "aspettano"}, false},
};

// Subject pronouns with their Italian person (index into Verb::it) and, where
// English shows it, the gender an adjective must agree with.
struct Pronoun {
  const char *en, *it;
  int person;
  std::optional<Gender> gender;
};
const Pronoun kPronouns[] = {
    {"I", "io", 0, std::nullopt},  {"you", "tu", 1, std::nullopt}, {"he", "lui", 2, M},
    {"she", "lei", 2, F},          {"we", "noi", 3, std::nullopt}, {"they", "loro", 5, std::nullopt},
};
constexpr int kThirdSingular = 2, kThirdPlural = 5;

// Prepositions; `merges` = the Italian preposition that fuses with a definite
// article ("in" + "il" -> "nel"); `it` is written before any other determiner.
struct Preposition {
  const char *en, *it, *merges;
};
const Preposition kPrepositions[] = {
    {"in", "in", "in"},     {"on", "su", "su"},      {"near", "vicino a", "a"},
    {"with", "con", ""},    {"under", "sotto", ""},  {"without", "senza", ""},
};

const char* const kDeterminers[] = {"the", "a", "this", "my"};
constexpr int kEnglishDeterminerWords = 6;  // the, a, an, this, these, my

template <class T, size_t N>
const T& find(const T (&table)[N], std::string_view en, const char* kind) {
  for (const T& entry : table)
    if (en == entry.en) return entry;
  internal_fail("grammar: unknown ", kind, " \"", en, "\"");
}

const Verb& find_verb(std::string_view en) { return en == kBe.en ? kBe : find(kVerbs, en, "verb"); }

// How an Italian word begins decides its article: a vowel takes l' / gli / un',
// "s" + consonant, "z", "gn" or "ps" take lo / gli / uno, anything else il / i / un.
enum class Onset { Consonant, Vowel, Impure };

Onset onset(std::string_view word) {
  auto vowel = [](char c) { return std::string_view("aeiou").find(c) != std::string_view::npos; };
  if (vowel(word[0])) return Onset::Vowel;
  if ((word[0] == 's' && word.size() > 1 && !vowel(word[1])) || word[0] == 'z' ||
      word.starts_with("gn") || word.starts_with("ps"))
    return Onset::Impure;
  return Onset::Consonant;
}

// Index of the definite article il, lo, l', la, i, gli, le, in that order;
// the same index selects a merged preposition below.
int definite_article(Gender gender, bool plural, std::string_view next) {
  Onset o = onset(next);
  if (gender == M) {
    if (plural) return o == Onset::Consonant ? 4 : 5;
    return o == Onset::Consonant ? 0 : o == Onset::Impure ? 1 : 2;
  }
  if (plural) return 6;
  return o == Onset::Vowel ? 2 : 3;
}

const std::array<const char*, 7> kArticles = {"il", "lo", "l'", "la", "i", "gli", "le"};
struct Merged {
  const char* preposition;
  std::array<const char*, 7> forms;  // with il, lo, l', la, i, gli, le
};
const Merged kMerged[] = {
    {"in", {"nel", "nello", "nell'", "nella", "nei", "negli", "nelle"}},
    {"su", {"sul", "sullo", "sull'", "sulla", "sui", "sugli", "sulle"}},
    {"a", {"al", "allo", "all'", "alla", "ai", "agli", "alle"}},
};

std::string indefinite_article(Gender gender, std::string_view next) {
  Onset o = onset(next);
  if (gender == M) return o == Onset::Impure ? "uno" : "un";
  return o == Onset::Vowel ? "un'" : "una";
}

// A rendered noun phrase. Italian keeps the definite article apart, so a
// preposition can merge with it.
struct Rendered {
  std::vector<std::string> en;
  int article = -1;  // index into kArticles, or -1 when the phrase has no definite article
  std::vector<std::string> it;  // the Italian words after the definite article
  Gender gender;
  bool plural;
};

Rendered render_np(const NounPhrase& np) {
  const Noun& noun = find(kNouns, np.noun, "noun");
  if (np.plural && !*noun.en_plural) internal_fail("grammar: \"", np.noun, "\" is only used in the singular");
  Rendered out;
  out.gender = noun.gender;
  out.plural = np.plural;
  std::string en_noun = np.plural ? noun.en_plural : noun.en;
  std::string it_noun = np.plural ? noun.it_plural : noun.it;
  std::string en_adjective, it_adjective;
  if (!np.adjective.empty()) {
    const Adjective& adjective = find(kAdjectives, np.adjective, "adjective");
    en_adjective = adjective.en;
    it_adjective = adjective.it[(np.plural ? 2 : 0) + (noun.gender == F ? 1 : 0)];
  }

  // English: determiner, adjective, noun. Italian: determiner, noun, adjective.
  const std::string& en_next = en_adjective.empty() ? en_noun : en_adjective;
  if (np.determiner == "the") {
    out.en.push_back("the");
    out.article = definite_article(noun.gender, np.plural, it_noun);
  } else if (np.determiner == "a") {
    if (np.plural) internal_fail("grammar: \"a\" with the plural \"", en_noun, "\"");
    out.en.push_back(std::string_view("aeiou").find(en_next[0]) != std::string_view::npos ? "an" : "a");
    out.it.push_back(indefinite_article(noun.gender, it_noun));
  } else if (np.determiner == "this") {
    out.en.push_back(np.plural ? "these" : "this");
    static const char* const kThis[] = {"questo", "questa", "questi", "queste"};
    out.it.push_back(kThis[(np.plural ? 2 : 0) + (noun.gender == F ? 1 : 0)]);
  } else if (np.determiner == "my") {
    // Italian possessives take the article, chosen by the possessive itself:
    // "il mio amico", not "l'mio amico".
    out.en.push_back("my");
    static const char* const kMy[] = {"mio", "mia", "miei", "mie"};
    const char* mine = kMy[(np.plural ? 2 : 0) + (noun.gender == F ? 1 : 0)];
    out.article = definite_article(noun.gender, np.plural, mine);
    out.it.push_back(mine);
  } else {
    internal_fail("grammar: unknown determiner \"", np.determiner, "\"");
  }
  if (!en_adjective.empty()) out.en.push_back(en_adjective);
  out.en.push_back(en_noun);
  out.it.push_back(it_noun);
  if (!it_adjective.empty()) out.it.push_back(it_adjective);
  return out;
}

void append(std::vector<std::string>& words, const std::vector<std::string>& more) {
  words.insert(words.end(), more.begin(), more.end());
}

void append_italian(std::vector<std::string>& words, const Rendered& np) {
  if (np.article >= 0) words.push_back(kArticles[np.article]);
  append(words, np.it);
}

void append_prepositional(std::vector<std::string>& en, std::vector<std::string>& it, const Sentence& s) {
  const Preposition& prep = find(kPrepositions, s.preposition, "preposition");
  Rendered place = render_np(s.place);
  en.push_back(prep.en);
  append(en, place.en);
  std::string_view it_prep = prep.it;
  for (const Merged& merged : kMerged)
    if (place.article >= 0 && merged.preposition == std::string_view(prep.merges)) {
      // "vicino a" + "l'" -> "vicino all'": only the last word merges.
      std::string_view head = it_prep.substr(0, it_prep.size() - std::string_view(prep.merges).size());
      it.push_back(std::string(head) + merged.forms[place.article]);
      append(it, place.it);
      return;
    }
  it.push_back(std::string(it_prep));
  append_italian(it, place);
}

// Words joined by spaces, except after an elided article ("l'", "un'",
// "nell'"), which is written against the next word as Italian does.
std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) {
    if (!out.empty() && out.back() != '\'') out += ' ';
    out += word;
  }
  return out;
}

template <class T, size_t N>
const T& pick(const T (&table)[N], Rng& rng) {
  return table[rng.below(N)];
}

NounPhrase sample_np(Rng& rng, bool animate) {
  NounPhrase np;
  const Noun* noun;
  do noun = &pick(kNouns, rng);
  while (animate && !noun->animate);
  np.noun = noun->en;
  np.determiner = pick(kDeterminers, rng);
  np.plural = np.determiner != "a" && *noun->en_plural && rng.below(2) == 1;
  if (rng.below(2) == 1) np.adjective = pick(kAdjectives, rng).en;
  return np;
}

}  // namespace

Pair render(const Sentence& s) {
  std::vector<std::string> en, it;
  int person;
  std::optional<Gender> gender;
  bool plural;
  if (!s.pronoun.empty()) {
    const Pronoun& pronoun = find(kPronouns, s.pronoun, "pronoun");
    en.push_back(pronoun.en);
    it.push_back(pronoun.it);
    person = pronoun.person;
    gender = pronoun.gender;
    plural = person >= 3;
  } else {
    Rendered subject = render_np(s.subject);
    append(en, subject.en);
    append_italian(it, subject);
    person = subject.plural ? kThirdPlural : kThirdSingular;
    gender = subject.gender;
    plural = subject.plural;
  }

  const Verb& verb = find_verb(s.verb);
  if (&verb == &kBe) {
    static const char* const kEnglishBe[] = {"am", "are", "is", "are", "are", "are"};
    en.push_back(kEnglishBe[person]);
    it.push_back(verb.it[person]);
    if (!gender) internal_fail("grammar: \"be\" needs a subject of known gender, not \"", s.pronoun, "\"");
    const Adjective& adjective = find(kAdjectives, s.adjective, "adjective");
    en.push_back(adjective.en);
    it.push_back(adjective.it[(plural ? 2 : 0) + (*gender == F ? 1 : 0)]);
  } else {
    en.push_back(person == kThirdSingular ? verb.en_3sg : verb.en);
    it.push_back(verb.it[person]);
    if (verb.transitive != s.object.has_value())
      internal_fail("grammar: \"", s.verb, verb.transitive ? "\" needs an object" : "\" takes no object");
    if (s.object) {
      Rendered object = render_np(*s.object);
      append(en, object.en);
      append_italian(it, object);
    }
  }
  if (!s.preposition.empty()) append_prepositional(en, it, s);
  return {join(en), join(it), ""};
}

// Three kinds of sentence, in equal shares: an action on an object (sometimes
// with a place), an intransitive action with a place, and "be" + adjective.
Sentence sample_sentence(Rng& rng) {
  Sentence s;
  int kind = static_cast<int>(rng.below(3));
  bool copula = kind == 2;
  // A pronoun subject one time in four; "be" only with he / she, whose gender
  // the adjective can agree with.
  if (rng.below(4) == 0) {
    s.pronoun = copula ? (rng.below(2) ? "she" : "he") : pick(kPronouns, rng).en;
  } else {
    s.subject = sample_np(rng, /*animate=*/!copula);
  }
  if (copula) {
    s.verb = kBe.en;
    s.adjective = pick(kAdjectives, rng).en;
    return s;
  }
  const Verb* verb;
  do verb = &pick(kVerbs, rng);
  while (verb->transitive != (kind == 0));
  s.verb = verb->en;
  if (verb->transitive) s.object = sample_np(rng, /*animate=*/false);
  if (!verb->transitive || rng.below(3) == 0) {
    s.preposition = pick(kPrepositions, rng).en;
    s.place = sample_np(rng, /*animate=*/false);
  }
  return s;
}

Pair sample_pair(Rng& rng) { return render(sample_sentence(rng)); }

int lexicon_size() {
  return static_cast<int>(std::size(kNouns) + std::size(kAdjectives) + std::size(kVerbs) + 1 +
                          std::size(kPronouns) + std::size(kPrepositions)) +
         kEnglishDeterminerWords;
}

}  // namespace sf::data::grammar
