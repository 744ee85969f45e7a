// The report a validation feeds: {experiment_name}/report.html with the
// curves of metrics.jsonl, and the first validation sentences as samples and
// in the attention explorer.
#pragma once
#include <string>

#include "data/tokenizer.h"
#include "eval/validation.h"

namespace sf::report {

void write_validation_report(const std::string& experiment_name, const std::string& metrics_path,
                             const eval::ValidationResult& v, const data::Tokenizer& src_tokenizer,
                             const data::Tokenizer& tgt_tokenizer);

}  // namespace sf::report
