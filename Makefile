# Scratchformer build. `make` builds the library and the command; `make test`
# runs the doctest suite; `make SANITIZE=1 test` runs it under ASan + UBSan.
# Jobs run in parallel without -j.
MAKEFLAGS += -j$(shell nproc) --no-print-directory
CXX ?= g++
SHELL := /bin/bash

# -march=native: SIMD for the build machine's CPU; PORTABLE=1 builds for any x86-64.
ifeq ($(PORTABLE),1)
  ARCH_FLAGS :=
else
  ARCH_FLAGS := -march=native
endif
BASE_FLAGS := -std=c++20 -Wall -Wextra -pthread -MMD -MP -I. $(ARCH_FLAGS)
ifeq ($(SANITIZE),1)
  BUILD := build/sanitize
  # The sanitizers see every allocation when the caching allocator is off.
  CXXFLAGS ?= -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined -DSF_NO_CACHING_ALLOCATOR
  LDFLAGS ?= -fsanitize=address,undefined
else
  BUILD := build
  CXXFLAGS ?= -O3 -g
endif
ALL_FLAGS := $(BASE_FLAGS) $(CXXFLAGS) -DSF_BUILD_DIR='"$(BUILD)"'

LIB_SRC := $(wildcard autograd/*.cpp autograd/kernels/*.cpp nn/*.cpp optim/*.cpp data/*.cpp) \
           $(filter-out train/main.cpp,$(wildcard train/*.cpp))
TEST_SRC := $(wildcard tests/*.cpp)
LIB := $(BUILD)/libscratchformer.a
TESTS := $(BUILD)/tests
EXAMPLES := $(patsubst examples/%.cpp,$(BUILD)/examples/%,$(wildcard examples/*.cpp))

obj = $(patsubst %.cpp,$(BUILD)/obj/%.o,$(1))

.PHONY: all test bench demo report-check deps bench-deps clean
.SECONDARY:
CLI := $(BUILD)/scratchformer
all: $(LIB) $(CLI) $(EXAMPLES)

$(CLI): $(BUILD)/obj/train/main.o $(LIB)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS)

# Build dependencies, installed when missing (see tools/need-packages).
deps:
	@tools/need-packages doctest-dev:/usr/include/doctest/doctest.h \
	  nlohmann-json3-dev:/usr/include/nlohmann/json.hpp

$(BUILD)/obj/%.o: %.cpp | deps
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_FLAGS) -c $< -o $@

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

# The suite runs the examples and the command, so they are built first.
$(TESTS): $(call obj,$(TEST_SRC)) $(LIB) | $(EXAMPLES) $(CLI)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS)

$(BUILD)/examples/%: $(BUILD)/obj/examples/%.o $(LIB)
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS)

# The suite's last line is "tests: N passed, M failed" (printed by tests/main.cpp).
test: $(TESTS)
	@$(TESTS)

# The README's main job: train the default toy task (dates: English dates ->
# ISO) from scratch, then translate a few sentences with the trained model.
DEMO := build/demo
DEMO_SET := --set model_folder=$(DEMO)/weights --set experiment_name=$(DEMO)/run \
            --set 'tokenizer_file=$(DEMO)/tokenizer_{0}.json'
demo:
	@$(MAKE) SANITIZE= build/scratchformer
	@rm -rf $(DEMO)
	build/scratchformer train --config configs/dates.json $(DEMO_SET)
	@echo "sample translations (build/scratchformer translate):"
	@build/scratchformer translate --config configs/dates.json $(DEMO_SET) \
	  "tuesday , march 3rd 2021" "3 mar 21" "03/03/2021" "the 3rd of march , 2021" \
	  "july 14 , 1989" "25 december 1999" | paste -d '\t' <(printf '%s\n' \
	  "tuesday , march 3rd 2021" "3 mar 21" "03/03/2021" "the 3rd of march , 2021" \
	  "july 14 , 1989" "25 december 1999") - | sed 's/\t/  ->  /'

# Renders a freshly trained report in headless Chromium (Debian's chromium)
# and checks the page shows its curves and heatmaps; the screenshot is
# build/report-check/report.png.
REPORT := build/report-check
report-check:
	@$(MAKE) SANITIZE= build/scratchformer
	@tools/need-packages chromium:/usr/bin/chromium
	@rm -rf $(REPORT)
	build/scratchformer train --config configs/dates.json --set data.size=6000 --set num_epochs=3 \
	  --set model_folder=$(REPORT)/weights --set experiment_name=$(REPORT)/run \
	  --set 'tokenizer_file=$(REPORT)/tokenizer_{0}.json' 2>/dev/null
	tools/check-report $(REPORT)/run/report.html $(REPORT)/report.png

# Benchmarks: always optimised; OpenBLAS is the reference (the library never links it).
bench-deps:
	@tools/need-packages libopenblas-dev:/usr/include/x86_64-linux-gnu/cblas.h

build/bench: bench/bench.cpp build/libscratchformer.a | deps bench-deps
	$(CXX) $(BASE_FLAGS) -O3 $< build/libscratchformer.a -lopenblas -o $@

bench:
	@$(MAKE) SANITIZE= build/bench
	@build/bench build/bench.json

clean:
	rm -rf build

-include $(shell find $(BUILD)/obj -name '*.d' 2>/dev/null)
