# Scratchformer build. `make` builds the library and the command; `make test`
# runs the doctest suite, then builds the OpenCL variant and runs its backend
# tests on PoCL; `make SANITIZE=1 test` runs the suite under ASan + UBSan,
# `make SANITIZE=thread test` the threaded tests under ThreadSanitizer.
# `make OPENCL=1` builds the variant with the OpenCL backend in build/opencl/.
# `make MPI=1` adds build/mpi/scratchformer, the command for data-parallel
# training under mpirun (Open MPI; see "The MPI variant" below).
# Jobs run in parallel without -j; a recursive make ($(MAKE) in a recipe)
# shares its parent's job slots instead (forcing -j there again would print
# "warning: -jN forced in makefile: resetting jobserver mode").
ifeq ($(findstring jobserver,$(shell printenv MAKEFLAGS)),)
  MAKEFLAGS += -j$(shell getconf _NPROCESSORS_ONLN)
endif
# -r: no built-in rules. Every rule is written here, and a built-in one only
# misleads: `%: %.o` would "remake" an included
# build/fuzz/obj/fuzz/main-TARGET.d from main-TARGET.d.o, which the fuzzers'
# main-%.o rule then tries to compile (clang errors on a tree where make
# succeeds, whenever fuzz/libfuzzer_main.cpp is newer than those .d files).
MAKEFLAGS += --no-print-directory -r
# `make` alone builds everything (rules for generated files come before `all`).
.DEFAULT_GOAL := all
CXX ?= g++
SHELL := /bin/bash

# The highest x86-64 level the build machine's CPU has (x86-64-v4: AVX-512;
# v3: AVX2 + FMA), not -march=native: native also tunes for the CPU's model,
# and two CPUs of one level then round some float sums differently (a Xeon's
# training run would differ from a Zen 4's in the fifth digit), where one
# level's code gives every such CPU the same results. PORTABLE=1 builds for
# any x86-64. ARCH_FLAGS=... on the command line overrides both.
NATIVE_MACROS := $(shell $(CXX) -march=native -dM -E -x c++ /dev/null 2>/dev/null)
has_all = $(if $(strip $(foreach m,$(1),$(if $(filter $(m),$(NATIVE_MACROS)),,missing))),,yes)
ifeq ($(PORTABLE),1)
  ARCH_FLAGS :=
else ifeq ($(call has_all,__AVX512F__ __AVX512BW__ __AVX512CD__ __AVX512DQ__ __AVX512VL__),yes)
  ARCH_FLAGS := -march=x86-64-v4
else ifeq ($(call has_all,__AVX2__ __FMA__ __BMI2__ __F16C__ __LZCNT__ __MOVBE__),yes)
  ARCH_FLAGS := -march=x86-64-v3
else
  ARCH_FLAGS := -march=native
endif
GENERATED := build/gen
OS := $(shell uname -s)
# Clang on Linux builds against libc++, LLVM's C++ library (macOS's, where
# clang and libc++ are the defaults): a check that the code needs nothing
# only libstdc++ has. Its objects go to build/clang/, beside GCC's in build/.
ifeq ($(OS)-$(findstring clang,$(CXX)),Linux-clang)
  STDLIB_FLAGS := -stdlib=libc++
  STDLIB_PACKAGES := clang:/usr/bin/clang++ libc++-dev:/usr/share/doc/libc++-dev/copyright \
                     libc++abi-dev:/usr/share/doc/libc++abi-dev/copyright
endif
BASE_FLAGS := -std=c++20 -Wall -Wextra -pthread -MMD -MP -I. -I$(GENERATED) $(ARCH_FLAGS) $(STDLIB_FLAGS)
# On macOS the packages are Homebrew's (tools/need-packages then names the
# formulae to install), and OpenCL is the system's framework, its CL/
# headers Homebrew's. Elsewhere, Debian's (below).
ifeq ($(OS),Darwin)
  BREW := $(shell brew --prefix 2>/dev/null)
  BASE_FLAGS += -I$(BREW)/include
  BUILD_PACKAGES := doctest:$(BREW)/include/doctest/doctest.h nlohmann-json:$(BREW)/include/nlohmann/json.hpp
  OPENCL_PACKAGES := opencl-headers:$(BREW)/include/CL/cl.h
  OPENCL_LIBS := -framework OpenCL
  MPI_PACKAGES := open-mpi:$(BREW)/bin/mpicxx pmix:$(BREW)/include/pmix.h pkgconf:$(BREW)/bin/pkg-config
endif
# The tests' own code (tests/, the fuzz targets the suite replays) is compiled
# at -O0 with line tables only (-g1: a failure's backtrace still names its
# file and line), the library they test with CXXFLAGS: their run time is the
# library's, and their compile time is most of each build's (-O3 -g for
# them took twice -O1 -g1's time; -O0 takes 25 % less than -O1 again, 40 %
# less under ASan + UBSan: test_train.cpp 18.4 s at -O1, 10.8 s at -O0).
# The kernel tests (the table, its reference implementations, the checks
# against them) are the exception, at -O1: their own loops are much of their
# time, on every SIMD level and under qemu. Under a
# sanitizer the compute kernels are compiled at -O2, the rest of the library
# at -O1: the kernels' loops are most of the sanitized suite's time, and at
# -O2 they run a third faster, every access still checked (a training test
# under ASan: 102 s with the kernels at -O1, 74 s at -O2), for 5 s more of
# compiling. A CXXFLAGS given to make is the whole build's.
ifeq ($(origin CXXFLAGS),undefined)
  TEST_OBJ_FLAGS := -O0 -g1
  KERNEL_TEST_OBJ_FLAGS := -O1 -g1
  ifneq ($(SANITIZE),)
    KERNEL_OBJ_FLAGS := -O2
  endif
endif
# The sanitized builds carry line tables only (-g1): a report's stack still
# names each frame's function, file and line (inlined ones too), and the
# library compiles in 25-35 % less time than with -g's variables and types
# (dist/data_parallel.cpp under ASan + UBSan: 34.8 s of CPU with -g, 23.2 s with -g1).
ifeq ($(SANITIZE),thread)
  BUILD := build/tsan
  CXXFLAGS ?= -O1 -g1 -fno-omit-frame-pointer -fsanitize=thread
  LDFLAGS ?= -fsanitize=thread
else ifeq ($(SANITIZE),1)
  BUILD := build/sanitize
  CXXFLAGS ?= -O1 -g1 -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined
  # Linked at a fixed address on Linux (-no-pie): UBSan's check sites hold
  # some 740,000 pointers, which a position-independent program relocates at
  # every start, 80 ms of each of the suite's many runs of the command.
  LDFLAGS ?= -fsanitize=address,undefined $(if $(filter Linux,$(OS)),-no-pie)
else
  BUILD := build
  CXXFLAGS ?= -O3 -g
endif
ifdef STDLIB_FLAGS
  BUILD := build/clang$(BUILD:build%=%)
endif
# The rooms above nn/, optim/ and data/ (README.md's layout): all but cli/,
# the command's main(), are library.
ROOMS := setup dist infer onnx eval report train
LIB_SRC := $(wildcard base/*.cpp autograd/*.cpp autograd/kernels/*.cpp nn/*.cpp optim/*.cpp data/*.cpp) \
           $(foreach room,$(ROOMS),$(wildcard $(room)/*.cpp))
# The OpenCL backend (autograd/opencl/): its own build folder, the ICD loader,
# and PoCL so that a machine without a GPU still has an OpenCL device. (PoCL's
# marker is its copyright file: its .icd file is a conffile, which outlives a
# package removed but not purged.)
OPENCL_PACKAGES ?= ocl-icd-opencl-dev:/usr/lib/x86_64-linux-gnu/libOpenCL.so \
                   opencl-headers:/usr/include/CL/cl.h pocl-opencl-icd:/usr/share/doc/pocl-opencl-icd/copyright \
                   clinfo:/usr/bin/clinfo
OPENCL_LIBS ?= -lOpenCL
# The variant compiles only the sources that differ in it: the backend and
# those that name SF_OPENCL, or SF_BUILD_DIR (the folder a test runs programs
# from). The rest are the plain build's objects (PLAIN_BUILD), compiled with
# its flags, so that `make test`, which builds both, compiles them once.
PLAIN_BUILD := $(BUILD)
PLAIN_FLAGS := $(BASE_FLAGS) $(CXXFLAGS) -DSF_BUILD_DIR='"$(BUILD)"'
ifeq ($(OPENCL),1)
  BUILD := $(BUILD)/opencl
  BASE_FLAGS += -DSF_OPENCL -I$(BUILD)/gen
  LIB_SRC += $(wildcard autograd/opencl/*.cpp)
  LDLIBS := $(OPENCL_LIBS)
  VARIANT_SRC := $(wildcard autograd/opencl/*.cpp) \
                 $(shell grep -lE '^([^/]|/[^/])*(SF_OPENCL|SF_BUILD_DIR)' $(wildcard */*.cpp */*/*.cpp))
  # A header that named them would make each file that includes it differ.
  VARIANT_HEADERS := $(filter-out autograd/opencl/%,$(shell grep -lE '^([^/]|/[^/])*(SF_OPENCL|SF_BUILD_DIR)' $(wildcard */*.h */*/*.h)))
  $(if $(VARIANT_HEADERS),$(error $(VARIANT_HEADERS): names SF_OPENCL or SF_BUILD_DIR outside a comment; \
    the OpenCL variant reuses the plain objects of the files that include it: keep the macro in a .cpp file))
endif
ALL_FLAGS := $(BASE_FLAGS) $(CXXFLAGS) -DSF_BUILD_DIR='"$(BUILD)"'

# The OpenCL C sources: each .cl file of autograd/opencl/kernels/, and
# autograd/kernels/shared.h, which C++ and OpenCL C share, becomes a raw string
# literal in $(BUILD)/gen/<its path>.inc, which autograd/opencl/sources.cpp
# includes: the library carries its kernels and never reads a .cl file. The
# #line names the file in PoCL's or a driver's build errors; the delimiter
# )CLC" must not occur in a source.
OPENCL_TEXTS := $(wildcard autograd/opencl/kernels/*.cl) autograd/kernels/shared.h
$(BUILD)/gen/%.inc: %
	@mkdir -p $(dir $@)
	@! grep -q ')CLC"' $< || { echo '$<: holds )CLC", which ends its embedding early' >&2; exit 1; }
	{ printf 'R"CLC(#line 1 "%s"\n' $<; cat $<; printf ')CLC"\n'; } > $@
$(BUILD)/obj/autograd/opencl/sources.o: $(OPENCL_TEXTS:%=$(BUILD)/gen/%.inc)

# The attention explorer's script and style (report/attention_explorer.js and
# .css) become raw string literals the same way, in $(GENERATED), shared by
# every build; the page carries them, nothing is fetched.
WEB_TEXTS := report/attention_explorer.js report/attention_explorer.css
$(WEB_TEXTS:%=$(GENERATED)/%.inc): $(GENERATED)/%.inc: %
	@mkdir -p $(dir $@)
	@! grep -q ')WEB"' $< || { echo '$<: holds )WEB", which ends its embedding early' >&2; exit 1; }
	{ printf 'R"WEB('; cat $<; printf ')WEB"\n'; } > $@
$(PLAIN_BUILD)/obj/report/attention_explorer.o: $(WEB_TEXTS:%=$(GENERATED)/%.inc)

# The suite replays the fuzz targets' regression inputs, so it holds the targets.
TEST_SRC := $(wildcard tests/*.cpp) $(filter-out fuzz/libfuzzer_main.cpp,$(wildcard fuzz/*.cpp))
# Under ThreadSanitizer the suite is the tests that run work on several
# threads (the pool, the kernels, gradients, layers and a Transformer step on
# 1 and 2 threads), by their names' prefixes: its binary holds the suite's
# helpers and the test files that define such a case (a name's prefix found
# by grep as doctest's filter matches it, ignoring case), and no examples.
TSAN_TESTS := thread pool*,kernels*,grad*,engine*,nn*
comma := ,
open := (
close := )
ifeq ($(SANITIZE),thread)
  TEST_SRC := $(filter-out tests/test_%.cpp fuzz/%,$(TEST_SRC)) \
    $(shell grep -liE 'TEST_CASE[$(open)]"$(open)$(subst *,,$(subst $(comma),|,$(TSAN_TESTS)))$(close)' tests/test_*.cpp)
endif
LIB := $(BUILD)/libscratchformer.a
TESTS := $(BUILD)/tests
EXAMPLES := $(patsubst examples/%.cpp,$(BUILD)/examples/%,$(wildcard examples/*.cpp))

obj = $(foreach f,$(1),$(if $(filter $(f),$(VARIANT_SRC)),$(BUILD),$(PLAIN_BUILD))/obj/$(f:.cpp=.o))

.PHONY: all test docs-check docs-deps bench demo report-check onnx-page-check deps bench-deps clean fuzz fuzz-deps mpi-deps torch-deps \
        aarch64-deps
.SECONDARY:
CLI := $(BUILD)/scratchformer
# The command built by this compiler without sanitizers (report-check's).
RELEASE_CLI := $(if $(STDLIB_FLAGS),build/clang,build)/scratchformer
all: $(LIB) $(CLI) $(EXAMPLES)

$(CLI): $(call obj,cli/main.cpp) $(LIB)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

# Headers the build writes into $(GENERATED), shared by every variant (each
# depends on sources only): the kernel table's entry names (tools/kernel-list).
$(GENERATED)/kernel_list.h: autograd/kernels/kernels.h tools/kernel-list
	@mkdir -p $(dir $@)
	tools/kernel-list $< > $@.tmp && mv $@.tmp $@

# Build dependencies, installed when missing (see tools/need-packages), and
# the generated headers, which every compile may include.
BUILD_PACKAGES ?= doctest-dev:/usr/include/doctest/doctest.h nlohmann-json3-dev:/usr/include/nlohmann/json.hpp
deps: $(GENERATED)/kernel_list.h
	@tools/need-packages $(BUILD_PACKAGES) $(STDLIB_PACKAGES) $(if $(filter 1,$(OPENCL)),$(OPENCL_PACKAGES)) \
	  $(if $(filter 1,$(MPI)),$(MPI_PACKAGES))

$(BUILD)/obj/%.o: %.cpp | deps
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_FLAGS) $(OBJ_FLAGS) -c $< -o $@
ifneq ($(BUILD),$(PLAIN_BUILD))
$(PLAIN_BUILD)/obj/%.o: %.cpp | deps
	@mkdir -p $(dir $@)
	$(CXX) $(PLAIN_FLAGS) $(OBJ_FLAGS) -c $< -o $@
endif
$(call obj,$(TEST_SRC) tests/cross/train_losses.cpp): OBJ_FLAGS := $(TEST_OBJ_FLAGS)
$(call obj,$(wildcard autograd/kernels/*.cpp)): OBJ_FLAGS := $(KERNEL_OBJ_FLAGS)

$(LIB): $(call obj,$(LIB_SRC))
	@rm -f $@
	ar rcs $@ $^

# The MPI variant (MPI=1): $(BUILD)/mpi/scratchformer, run as `mpirun -np N
# $(BUILD)/mpi/scratchformer train ...`. Only cli/main.cpp (built with
# -DSF_MPI) and dist/mpi/ differ from the plain command, so they alone are
# compiled, into $(BUILD)/mpi/obj/, and linked with the same $(LIB). They
# also use PMIx, the interface between Open MPI and its launcher (the
# communicator ends a failed job through it). mpicxx's and pkg-config's
# flags are read as the recipes run: deps may install Open MPI in this make.
MPI_PACKAGES ?= libopenmpi-dev:/usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h openmpi-bin:/usr/bin/orterun \
                libpmix-dev:/usr/lib/x86_64-linux-gnu/pkgconfig/pmix.pc pkgconf:/usr/bin/pkg-config
MPI_COMPILE := $$(mpicxx --showme:compile) $$(pkg-config --cflags pmix)
MPI_LINK := $$(mpicxx --showme:link) $$(pkg-config --libs pmix)
mpi-deps:
	@tools/need-packages $(MPI_PACKAGES)
ifeq ($(MPI),1)
all: $(BUILD)/mpi/scratchformer

MPI_OBJ := $(patsubst %.cpp,$(BUILD)/mpi/obj/%.o,cli/main.cpp $(wildcard dist/mpi/*.cpp))
$(BUILD)/mpi/scratchformer: $(MPI_OBJ) $(LIB)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(MPI_LINK) $(LDLIBS)

# The all-reduce table's program (bench/mpi/allreduce.cpp, run by make bench;
# the suite "mpi" runs its exact-sum check).
$(BUILD)/mpi/allreduce-bench: $(BUILD)/mpi/obj/bench/mpi/allreduce.o $(filter $(BUILD)/mpi/obj/dist/mpi/%,$(MPI_OBJ)) $(LIB)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(MPI_LINK) $(LDLIBS)

$(BUILD)/mpi/obj/%.o: %.cpp | deps
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_FLAGS) -DSF_MPI $(MPI_COMPILE) -c $< -o $@

-include $(shell find $(BUILD)/mpi/obj -name '*.d' 2>/dev/null)
endif

# The suite runs the examples and the command, so they are built first.
$(TESTS): $(call obj,$(TEST_SRC)) $(LIB) | $(if $(filter thread,$(SANITIZE)),,$(EXAMPLES)) $(CLI)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

$(foreach e,$(EXAMPLES),$(eval $(e): $(call obj,$(e:$(BUILD)/%=%.cpp)) $(LIB)))
$(EXAMPLES):
	@mkdir -p $(dir $@)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)

# The whole suite, the kernel tests at each other SIMD level (below), then (except
# under the sanitizers, whose builds skip them) the kernel tests cross-built
# for AArch64 and run under qemu (below), the OpenCL variant's suite
# "opencl" on PoCL and the suite "mpi", which trains under mpirun with the MPI
# variant, then the docs check (below), then each fuzzer for FUZZ_SECONDS (below). tools/run-tests
# prints each suite's report and, last, the summary line
# "tests: N passed, M failed[, K skipped]" over all of them. It runs them
# side by side where they leave cores idle: the suite as chunks of its test
# cases beside the kernel levels, one chunk per core, cut so that they take
# the same time by each case's time measured before (tests/case_times/), while
# the variants and the fuzzers build ahead; and the docs checks together.
# PoCL caches the kernels it compiles in build/pocl-cache.
# Under ThreadSanitizer: the tests that run work on several threads (TSAN_TESTS, above).
# The suite "mpi" also trains on OpenCL under mpirun where the OpenCL variant was built.
MPI_TEST_BUILD := $(MAKE) MPI=1 $(BUILD)/mpi/scratchformer $(BUILD)/mpi/allreduce-bench && \
  { [ ! -e $(BUILD)/opencl/tests ] || $(MAKE) MPI=1 OPENCL=1 $(BUILD)/opencl/mpi/scratchformer $(BUILD)/opencl/scratchformer; }
# PyTorch, the reference of the parity tests (tests/test_nn_pytorch.cpp: our
# checkpoints, bf16 exports and bf16 autocast against PyTorch's) and of the
# benchmarks' training steps: Debian's python3-torch, installed when missing.
# Where it cannot be, those tests report themselves skipped and the benchmark
# leaves PyTorch's column out, so its absence stops nothing. (After deps: two
# apt-get runs at once would fight over dpkg's lock.)
TORCH_PACKAGES := python3-torch:/usr/lib/python3/dist-packages/torch/__init__.py
torch-deps: | deps
	@tools/need-packages $(TORCH_PACKAGES) || echo "PyTorch is missing: its parity tests and columns are skipped" >&2

# How many test cases each part has: a part that reports fewer (a -tc filter
# that matches nothing, a test file left out of the build) fails the run, as
# does a skip whose reason does not hold on this machine (tools/run-tests).
MIN_TESTS := 273
MIN_TSAN_TESTS := 80
MIN_KERNEL_LEVEL_TESTS := 8
MIN_OPENCL_TESTS := 31
MIN_MPI_TESTS := 22
KERNEL_LEVEL_RUNS = $(KERNEL_LEVEL_TESTS:%=--kernel-level $(MIN_KERNEL_LEVEL_TESTS) %)

# When this make started, so that run-tests can say how long the build before
# the suite took (:= takes the time as the Makefile is read, before any build).
export SF_MAKE_START := $(shell date +%s)
test: $(TESTS) | torch-deps
ifeq ($(SANITIZE),thread)
	@SF_TEST_FILTER='$(TSAN_TESTS)' TSAN_OPTIONS=halt_on_error=1 tools/run-tests --build thread \
	  --suite $(MIN_TSAN_TESTS) $(TESTS)
else ifeq ($(SANITIZE),1)
	@tools/run-tests --build sanitize --suite $(MIN_TESTS) $(TESTS) $(KERNEL_LEVEL_RUNS)
else ifeq ($(OPENCL),)
	@tools/run-tests --suite $(MIN_TESTS) $(TESTS) $(KERNEL_LEVEL_RUNS) $(AARCH64_RUN) \
	  --opencl $(MIN_OPENCL_TESTS) "$(MAKE) OPENCL=1 deps" "$(MAKE) OPENCL=1 $(BUILD)/opencl/tests" $(BUILD)/opencl/tests \
	  --mpi $(MIN_MPI_TESTS) "$(MAKE) MPI=1 mpi-deps" "$(MPI_TEST_BUILD)" $(TESTS) \
	  $(DOCS_TESTS) $(REPORT_TESTS) $(ONNX_PAGE_TESTS) $(FUZZ_TESTS) $(MAKE_AGAIN_TESTS) $(TRACKED_TESTS) \
	  $(ENVIRONMENT_TESTS)
else
	@tools/run-tests --suite $(MIN_TESTS) $(TESTS) $(KERNEL_LEVEL_RUNS)
endif

# The docs check: every excerpt README.md and docs/ quote is in the tree, every
# command they show runs (or, for make targets, dry-runs), every link resolves;
# each document in a fresh folder, and beside that (each keeps about 1.6 of
# two cores busy) all of them in reading order in one folder, as a learner
# runs them (--in-order: no run may stumble on what an earlier one left); and
# its self-test, whose broken fixture docs (tests/docs_check/) must fail.
# tools/docs-check explains the rules; `make test` counts each as one test.
# The docs run build/tests and build/scratchformer, so those are built first.
# tools/docs-check is Python 3 (standard library only), installed when missing.
# And the layers: no #include runs from a folder to one above it (tools/check-layers).
# And tools/run-tests' own self-test: a fake suite, sound and broken (tests/run_tests/).
# Built by Clang, the documents' figures (a GCC build's) may differ in their
# last digits: docs-check then compares all but the numbers (SF_DOCS_ANY_FIGURES).
DOCS_ENV := SF_DOCS_BUILD=$(BUILD) $(if $(STDLIB_FLAGS),SF_DOCS_ANY_FIGURES=1)
DOCS_TESTS := --command "docs-check: README.md and docs/ match the tree" \
    "$(MAKE) docs-deps && $(DOCS_ENV) tools/docs-check" \
  --command-beside "docs-check --in-order: README.md then the course in reading order, in one folder" \
    "$(MAKE) docs-deps && $(DOCS_ENV) tools/docs-check --in-order" \
  --command-beside "docs-check --self-test: broken docs fail" "$(MAKE) docs-deps && tools/docs-check --self-test" \
  --command-beside "check-layers: no include runs from a folder to one above it" "$(MAKE) docs-deps && tools/check-layers" \
  --command-beside "run-tests' self-test: a suite's chunks that lose, fail or miscount cases fail" tests/run_tests/self-test
docs-deps:
	@tools/need-packages python3:/usr/bin/python3
# The data-parallel chapter runs the MPI variant under mpirun, so docs-check builds it too.
# The two checks run at once, as in `make test`: the in-order one's report
# follows the other's.
docs-check: $(TESTS) $(CLI) $(EXAMPLES) | docs-deps
	@$(MAKE) MPI=1 mpi-deps && $(MAKE) MPI=1 $(BUILD)/mpi/scratchformer
	@tools/docs-check --self-test
	@log=$$(mktemp) && { $(DOCS_ENV) tools/docs-check --in-order >"$$log" 2>&1 & } && in_order=$$! \
	  && { $(DOCS_ENV) tools/docs-check; status=$$?; wait $$in_order; in_order_status=$$?; \
	       cat "$$log"; rm -f "$$log"; [ $$status -eq 0 ] && [ $$in_order_status -eq 0 ]; }

# Fuzzing with clang's libFuzzer. `make fuzz` builds one fuzzer per kind of
# input (fuzz/targets.h) in build/fuzz/, under ASan and UBSan, and their seed
# corpora from real files (fuzz/make-seeds). `make fuzz-run-TARGET` fuzzes one
# for FUZZ_SECONDS, growing build/fuzz/corpus/TARGET and writing any crashing
# input to build/fuzz/crashes/TARGET/; `make test` does that for every target.
# A crash, once understood, is kept in fuzz/regressions/TARGET/, and what it
# must now give in fuzz/regressions/expected, which the doctest suite checks
# (tests/test_fuzz_regressions.cpp).
FUZZ_TARGETS := config tokenizer checkpoint state corpus
FUZZ_SECONDS ?= 20
FUZZ := build/fuzz
FUZZ_PACKAGES := clang:/usr/bin/clang++ libclang-rt-dev:/usr/share/doc/libclang-rt-dev/copyright
# The fuzzers are clang's whatever CXX is, with its default C++ library.
FUZZ_FLAGS := $(filter-out $(STDLIB_FLAGS),$(BASE_FLAGS)) -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
              -fno-sanitize-recover=undefined -DSF_BUILD_DIR='"$(FUZZ)"'
FUZZ_LIB := $(FUZZ)/libscratchformer.a
# For `make test`: the fuzzers and their seeds built (one test), then the
# targets fuzzed two at a time, side by side (libFuzzer runs one thread, so
# two cores fuzz two targets in the time of one), one test a pair; each test
# skipped (exit 77) when clang cannot be installed. `-O` (GNU make 4 on; not
# macOS's make 3.81): each fuzzer's output in one piece.
fuzz_pairs = $(if $(1),$(word 1,$(1))$(if $(word 2,$(1)),+$(word 2,$(1))) $(call fuzz_pairs,$(wordlist 3,$(words $(1)),$(1))))
FUZZ_TESTS := --command-ahead "fuzz: the fuzzers and their seed corpora build" \
    "$(MAKE) fuzz-deps >/dev/null || exit 77; $(MAKE) fuzz" \
  $(foreach p,$(call fuzz_pairs,$(FUZZ_TARGETS)),--command "fuzz $(subst +, and ,$(p)) for $(FUZZ_SECONDS) s" \
    "$(MAKE) fuzz-deps >/dev/null || exit 77; $(MAKE) $(if $(filter output-sync,$(.FEATURES)),-O) FUZZ_SECONDS=$(FUZZ_SECONDS) $(patsubst %,fuzz-run-%,$(subst +, ,$(p)))")

fuzz: $(patsubst %,$(FUZZ)/fuzz-%,$(FUZZ_TARGETS)) $(FUZZ)/seeds/done

fuzz-deps:
	@tools/need-packages $(FUZZ_PACKAGES)

$(FUZZ)/obj/%.o: %.cpp | deps fuzz-deps
	@mkdir -p $(dir $@)
	clang++ $(FUZZ_FLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ)/obj/fuzz/main-%.o: fuzz/libfuzzer_main.cpp | deps fuzz-deps
	@mkdir -p $(dir $@)
	clang++ $(FUZZ_FLAGS) -DSF_FUZZ_TARGET=$* -c $< -o $@

# What the targets read (configs, tokenizers, checkpoints, optimizer states,
# corpora) lies at setup/ and below: the rooms above it are not compiled here.
FUZZ_LIB_SRC := $(filter-out autograd/opencl/% $(foreach room,$(filter-out setup,$(ROOMS)),$(room)/%),$(LIB_SRC))
$(FUZZ_LIB): $(patsubst %.cpp,$(FUZZ)/obj/%.o,$(FUZZ_LIB_SRC) fuzz/scratch.cpp)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ)/fuzz-%: $(FUZZ)/obj/fuzz/main-%.o $(FUZZ)/obj/fuzz/%.o $(FUZZ_LIB)
	clang++ $(FUZZ_FLAGS) -fsanitize=fuzzer $^ -o $@

$(FUZZ)/seeds/done: fuzz/make-seeds $(wildcard configs/*.json) | $(CLI)
	fuzz/make-seeds $(CLI) $(FUZZ)/seeds
	@touch $@

# -rss_limit_mb: a loader asking for gigabytes is a finding, not a slow run.
fuzz-run-%: $(FUZZ)/fuzz-% $(FUZZ)/seeds/done
	@mkdir -p $(FUZZ)/corpus/$* $(FUZZ)/crashes/$*
	$(FUZZ)/fuzz-$* -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ)/crashes/$*/ $(FUZZ)/corpus/$* $(FUZZ)/seeds/$*

# ---- The CPU kernels at every SIMD level --------------------------------------
# simd.h fixes the vector width at compile time, so the build above runs the
# kernels at one SIMD level only, this machine's (ARCH_FLAGS). The kernel
# sources, which need nothing else of the library but the CPU device that the
# kernel table's cases run through (autograd/device.cpp), the calls to the
# operating system (base/platform.cpp) and the environment's table (the bf16
# level a test forces: base/environment.cpp), and
# tests/test_kernels.cpp with the table (tests/kernel_cases.cpp,
# tests/kernel_conformance.cpp) are built again for each other level the
# kernels are written for, into one small doctest binary per level,
# $(KERNEL_LEVEL_DIR)/LEVEL/tests: seconds of compiling, not a second library.
# tests/kernel_levels/cpu_check.cpp, built for plain x86-64, makes a binary
# whose level this CPU cannot run report itself skipped. `make test` runs them
# after the main suite; the OpenCL variant's `make OPENCL=1 test` leaves them
# to the plain one.
KERNEL_LEVEL_DIR := $(BUILD)/kernel-levels
KERNEL_LEVEL_SRC := $(wildcard autograd/kernels/*.cpp) autograd/device.cpp base/platform.cpp base/environment.cpp \
                    tests/test_kernels.cpp tests/kernel_cases.cpp tests/kernel_conformance.cpp
KERNEL_LEVEL_FLAGS := $(filter-out $(ARCH_FLAGS),$(ALL_FLAGS))
$(call obj,$(filter tests/%,$(KERNEL_LEVEL_SRC))): OBJ_FLAGS := $(KERNEL_TEST_OBJ_FLAGS)

# $(1): the level; $(2): its -march; $(3): floats per vector there (simd.h's
# Vec::width, which the binary's test "built for the expected SIMD level" checks).
define kernel_level
$(KERNEL_LEVEL_DIR)/$(1)/obj/%.o: %.cpp | deps
	@mkdir -p $$(dir $$@)
	$$(CXX) $$(KERNEL_LEVEL_FLAGS) -march=$(2) -DSF_SIMD_WIDTH=$(3) $$(OBJ_FLAGS) -c $$< -o $$@
$(KERNEL_LEVEL_DIR)/$(1)/cpu_check.o: tests/kernel_levels/cpu_check.cpp | deps
	@mkdir -p $$(dir $$@)
	$$(CXX) $$(KERNEL_LEVEL_FLAGS) -march=x86-64 -DSF_SIMD_LEVEL='"$(1)"' $$(TEST_OBJ_FLAGS) -c $$< -o $$@
$(patsubst %.cpp,$(KERNEL_LEVEL_DIR)/$(1)/obj/%.o,$(filter tests/%,$(KERNEL_LEVEL_SRC))): OBJ_FLAGS := $$(KERNEL_TEST_OBJ_FLAGS)
$(KERNEL_LEVEL_DIR)/$(1)/tests: $(KERNEL_LEVEL_DIR)/$(1)/cpu_check.o $(KERNEL_LEVEL_DIR)/main.o \
                                $(patsubst %.cpp,$(KERNEL_LEVEL_DIR)/$(1)/obj/%.o,$(KERNEL_LEVEL_SRC))
	$$(CXX) $$(KERNEL_LEVEL_FLAGS) $$^ -o $$@ $$(LDFLAGS)
endef
# LEVEL:MARCH:WIDTH. The level the build itself is for (ARCH_FLAGS) gets no
# binary: the suite, which holds the same kernel tests on the same kernel
# objects, runs them there, its test_kernels.cpp told that level's width.
KERNEL_LEVELS := avx512:x86-64-v4:16 avx2:x86-64-v3:8 portable:x86-64:1
level_field = $(word $(2),$(subst :, ,$(1)))
BUILD_LEVEL := $(firstword $(foreach l,$(KERNEL_LEVELS),$(if $(filter -march=$(call level_field,$(l),2),$(ARCH_FLAGS)),$(l))))
$(foreach l,$(filter-out $(BUILD_LEVEL),$(KERNEL_LEVELS)),$(eval $(call kernel_level,$(call level_field,$(l),1),$(call level_field,$(l),2),$(call level_field,$(l),3))))
ifneq ($(BUILD_LEVEL),)
  $(call obj,tests/test_kernels.cpp): OBJ_FLAGS := $(KERNEL_TEST_OBJ_FLAGS) -DSF_SIMD_WIDTH=$(call level_field,$(BUILD_LEVEL),3)
endif

# The doctest runner, shared by the levels (it runs no kernel code).
$(KERNEL_LEVEL_DIR)/main.o: tests/main.cpp | deps
	@mkdir -p $(dir $@)
	$(CXX) $(KERNEL_LEVEL_FLAGS) -march=x86-64 $(TEST_OBJ_FLAGS) -c $< -o $@

# (The levels are x86-64's: a compiler for another machine builds none of them,
# and the suite runs that machine's level.)
COMPILER_TARGET := $(shell $(CXX) -dumpmachine)
ifeq ($(OPENCL)$(filter thread,$(SANITIZE))$(filter-out x86_64-%,$(COMPILER_TARGET)),)
  KERNEL_LEVEL_TESTS := $(foreach l,$(filter-out $(BUILD_LEVEL),$(KERNEL_LEVELS)),$(KERNEL_LEVEL_DIR)/$(call level_field,$(l),1)/tests)
endif
test: $(KERNEL_LEVEL_TESTS)
-include $(shell find $(KERNEL_LEVEL_DIR) -name '*.d' 2>/dev/null)
# ---- (end of the CPU kernels at every SIMD level) ------------------------------

# ---- The CPU kernels on 64-bit ARM, under qemu ---------------------------------
# The same sources (KERNEL_LEVEL_SRC and the doctest runner) cross-compiled for
# AArch64 by Debian's g++-aarch64-linux-gnu: simd.h's NEON level, gemm.cpp's
# NEON micro-kernel and gemm_bf16_neon.cpp's BFDOT one. `make test` installs
# the cross compiler and qemu-user (tools/need-packages), builds
# $(AARCH64_DIR)/tests and runs it under qemu's user-mode emulation as two
# CPUs: a Cortex-A72 (ARMv8.0-A, NEON and nothing newer: the bf16 GEMM must
# fall back to the portable level) and qemu's "max" (every extension qemu has,
# SVE and BF16 among them: the BFDOT level), each named with the bf16 level it
# must choose. The Cortex-A72 runs every case: the kernel table against the
# reference and bit for bit across thread counts, as on x86. "max" runs only
# the cases whose code differs with the CPU (a doctest filter, after the number
# of cases it must find): the one feature the library asks an AArch64 CPU for
# is BF16 (base/platform.cpp), which picks the bf16 GEMM's level; every other
# case would run the very instructions the Cortex-A72 ran, in an emulator that
# gives both models the same results (all of them took "max" 111 s here, the
# Cortex-A72 53 s: BFDOT is slow to emulate). No sanitizer here: the x86
# builds have them. (On an AArch64 machine the suite itself runs the NEON
# level, natively: this part is for x86-64 ones.)
# (GCC's cross compiler, whichever CXX builds the rest: one folder for both.)
AARCH64_DIR := build/aarch64
AARCH64_CXX := aarch64-linux-gnu-g++
AARCH64_SYSROOT := /usr/aarch64-linux-gnu
AARCH64_PACKAGES := g++-aarch64-linux-gnu:/usr/bin/$(AARCH64_CXX) qemu-user:/usr/bin/qemu-aarch64
AARCH64_FLAGS := $(filter-out $(ARCH_FLAGS) $(STDLIB_FLAGS),$(BASE_FLAGS)) -O3 -g -DSF_BUILD_DIR='"$(AARCH64_DIR)"' -DSF_SIMD_WIDTH=4
AARCH64_QEMU_CPUS := cortex-a72:portable max:neon_bf16:2:*bf16*
# The kernel-level binaries' test cases but the AMX level's, an x86 one.
MIN_AARCH64_TESTS := 8
aarch64-deps:
	@tools/need-packages $(AARCH64_PACKAGES)
$(AARCH64_DIR)/obj/%.o: %.cpp | deps aarch64-deps
	@mkdir -p $(dir $@)
	$(AARCH64_CXX) $(AARCH64_FLAGS) $(OBJ_FLAGS) -c $< -o $@
$(patsubst %.cpp,$(AARCH64_DIR)/obj/%.o,tests/main.cpp $(filter tests/%,$(KERNEL_LEVEL_SRC))): OBJ_FLAGS := $(KERNEL_TEST_OBJ_FLAGS)
$(AARCH64_DIR)/tests: $(patsubst %.cpp,$(AARCH64_DIR)/obj/%.o,tests/main.cpp $(KERNEL_LEVEL_SRC))
	$(AARCH64_CXX) $(AARCH64_FLAGS) $^ -o $@
# Then a short training run (tests/cross/train_losses.cpp), built for this machine
# and for AArch64: the second, under qemu, must find the first's losses to
# 1e-5 relative. It needs the library's model, optimizer and data parts only.
# Those are compiled at -O1: qemu runs them a few seconds either way, and the
# kernels keep the flags above.
TRAIN_LOSSES_SRC := tests/cross/train_losses.cpp setup/loss.cpp \
  $(wildcard base/*.cpp autograd/*.cpp autograd/kernels/*.cpp nn/*.cpp optim/*.cpp data/*.cpp)
$(patsubst %.cpp,$(AARCH64_DIR)/obj/%.o,$(filter-out $(KERNEL_LEVEL_SRC),$(TRAIN_LOSSES_SRC))): \
  AARCH64_FLAGS := $(filter-out -O3 -g,$(AARCH64_FLAGS)) -O1
$(AARCH64_DIR)/train_losses: $(patsubst %.cpp,$(AARCH64_DIR)/obj/%.o,$(TRAIN_LOSSES_SRC))
	$(AARCH64_CXX) $(AARCH64_FLAGS) $^ -o $@
$(BUILD)/train_losses: $(call obj,tests/cross/train_losses.cpp) $(LIB)
	$(CXX) $(ALL_FLAGS) $^ -o $@ $(LDFLAGS) $(LDLIBS)
ifeq ($(SANITIZE)$(filter-out x86_64-%,$(COMPILER_TARGET)),)
  AARCH64_RUN := --aarch64 $(MIN_AARCH64_TESTS) "$(MAKE) aarch64-deps" \
    "$(MAKE) $(AARCH64_DIR)/tests $(AARCH64_DIR)/train_losses $(BUILD)/train_losses" \
    $(AARCH64_DIR)/tests $(AARCH64_SYSROOT) "$(AARCH64_QEMU_CPUS)" $(BUILD)/train_losses $(AARCH64_DIR)/train_losses
endif
-include $(shell find $(AARCH64_DIR) -name '*.d' 2>/dev/null)
# ---- (end of the CPU kernels on 64-bit ARM) ------------------------------------

# A make over a built tree prints no error. Every dependency file made older
# than the sources (as after touching every source, but nothing recompiles:
# the objects stay newer) makes make look for a rule to remake each included
# .d file, which is where a built-in rule once compiled the fuzzers' main
# for a target named "TARGET.d" (MAKEFLAGS's -r, at the top). The probe .d
# stands for the fuzzers' ones on a machine that has not built them. Last in
# `make test`, after the fuzzers.
MAKE_AGAIN_TESTS := --command "make again: a make over a built tree, its .d files out of date, prints no error" \
  "mkdir -p $(FUZZ)/obj/fuzz && touch $(FUZZ)/obj/fuzz/main-probe.d && find build -name '*.d' -exec touch -d @0 {} + \
   && { $(MAKE) all 2>&1; echo \"exit status \$$?\"; } > build/make-again.log; rm -f $(FUZZ)/obj/fuzz/main-probe.d*; \
   cat build/make-again.log; ! grep -i error build/make-again.log && grep -qx 'exit status 0' build/make-again.log"

# Nothing the build, a run or Python makes is tracked by git: build output,
# weights, runs, bytecode (outside a git checkout, a skip).
TRACKED_TESTS := --command "tracked files: no build output, weights, runs or bytecode" \
  "git rev-parse --git-dir >/dev/null 2>&1 || exit 77; \
   ! git ls-files | grep -E '(^|/)(build|weights|runs|__pycache__)/|\.(pyc|o|a|d)\$$'"

# The library (its folders: LIB_SRC's, the backend's and the MPI variant's,
# and the command's) reads the environment only through the table of
# base/environment.cpp, which docs/10-formats.md documents row by row (the
# suite's "environment:" tests): a variable read anywhere else would go
# undocumented.
ENVIRONMENT_TESTS := --command "environment: only base/environment.cpp calls getenv in the library" \
  "! grep -rlw --include='*.cpp' --include='*.h' getenv base autograd nn optim data $(ROOMS) cli \
   | grep -vx base/environment.cpp"

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

# Renders a freshly trained report, and the attention page `translate
# --attention` writes, in Debian's headless Chromium driven by puppeteer-core
# (tools/check-report): the charts' texts fit and do not overlap, and the
# attention explorer highlights the keys its data says under mouse and
# keyboard. Screenshots: build/report-check/report.png and translate.png.
# Exit 77 (a skip, see tools/run-tests) only when Chromium, Node or
# puppeteer-core cannot be installed.
REPORT := build/report-check
REPORT_TESTS := --command "report-check: a trained report and its attention explorer work in Chromium" \
  "tools/check-report --install || exit 77; $(MAKE) report-check"
report-check:
	@$(MAKE) SANITIZE= $(RELEASE_CLI)
	@tools/check-report --install
	@rm -rf $(REPORT)
	$(RELEASE_CLI) train --config configs/dates.json --set data.size=6000 --set num_epochs=3 \
	  --set model_folder=$(REPORT)/weights --set experiment_name=$(REPORT)/run \
	  --set 'tokenizer_file=$(REPORT)/tokenizer_{0}.json' 2>/dev/null
	tools/check-report $(REPORT)/run/report.html $(REPORT)/report.png
	$(RELEASE_CLI) translate --config configs/dates.json --set model_folder=$(REPORT)/weights \
	  --set 'tokenizer_file=$(REPORT)/tokenizer_{0}.json' --attention $(REPORT)/translate.html \
	  "july 14 , 1989" "3 mar 21"
	tools/check-report $(REPORT)/translate.html $(REPORT)/translate.png --no-charts

# The page an ONNX export writes (DIR/translate.html: transformers.js on ONNX
# Runtime Web's WebAssembly build), in the same headless Chromium: a model of
# the dates task on one shared BPE vocabulary is trained and exported,
# tools/check-translate-page copies the runtime's files beside the page,
# serves the folder from 127.0.0.1, types a sentence and expects what
# `translate --tokens` prints. Screenshot: build/onnx-page-check/translate.png.
# Exit 77 (a skip) only when Chromium, Node or the npm packages cannot be installed.
ONNX_PAGE := build/onnx-page-check
ONNX_PAGE_SET := --set model_folder=$(ONNX_PAGE)/weights --set experiment_name=$(ONNX_PAGE)/run \
  --set 'tokenizer_file=$(ONNX_PAGE)/tokenizer_{0}.json' --set tokenizer=bpe --set vocab_size=300 --set shared_vocab=true
ONNX_PAGE_TESTS := --command "onnx-page-check: an ONNX export's translate.html translates in Chromium" \
  "tools/check-translate-page --install || exit 77; $(MAKE) onnx-page-check"
onnx-page-check:
	@$(MAKE) SANITIZE= $(RELEASE_CLI)
	@tools/check-translate-page --install
	@rm -rf $(ONNX_PAGE)
	$(RELEASE_CLI) train --config configs/dates.json --set data.size=6000 $(ONNX_PAGE_SET) 2>/dev/null
	$(RELEASE_CLI) export --config configs/dates.json $(ONNX_PAGE_SET) --format onnx --out $(ONNX_PAGE)/export
	tools/check-translate-page $(ONNX_PAGE)/export "july 14 , 1989" \
	  "$$($(RELEASE_CLI) translate --tokens --config configs/dates.json $(ONNX_PAGE_SET) 'july 14 , 1989')" \
	  $(ONNX_PAGE)/translate.png

# Benchmarks: always optimised; OpenBLAS is the reference (the library never links it).
# (Debian's reference BLAS also installs a cblas.h: look for OpenBLAS's own.)
OPENBLAS_INCLUDE := /usr/include/x86_64-linux-gnu/openblas-pthread

# With OPENCL=1 the benchmark adds the OpenCL tables, beside CLBlast.
BENCH_LIBS := -lopenblas $(if $(filter 1,$(OPENCL)),-lclblast $(OPENCL_LIBS))
bench-deps:
	@tools/need-packages libopenblas-dev:$(OPENBLAS_INCLUDE)/cblas.h \
	  $(if $(filter 1,$(OPENCL)),libclblast-dev:/usr/include/clblast_c.h)

$(BUILD)/bench: $(wildcard bench/*.cpp bench/*.h) $(LIB) | deps bench-deps
	$(CXX) $(BASE_FLAGS) -O3 -I$(OPENBLAS_INCLUDE) $(wildcard bench/*.cpp) $(LIB) $(BENCH_LIBS) -o $@

# With MPI=1, then the data-parallel tables (bench/data_parallel.py: 2 ranks
# beside 1 process, the all-reduce's overlap with backward, ZeRO-1, PyTorch's
# DDP; bench/strong_scaling.py: the machine's cores split into ranks x
# threads), whose records join build/bench.json. (docs-deps: python3, which
# runs them.)
# BENCH_PARTS (e.g. "gemm memory") runs only those parts of build/bench.
bench: | torch-deps
	@$(MAKE) SANITIZE= $(BUILD)/bench
	@POCL_CACHE_DIR=$(abspath build/pocl-cache) $(BUILD)/bench build/bench.json $(BENCH_PARTS)
ifeq ($(MPI),1)
	@$(MAKE) SANITIZE= MPI=1 docs-deps $(CLI) $(BUILD)/mpi/scratchformer $(BUILD)/mpi/allreduce-bench
	@python3 bench/data_parallel.py $(BUILD) build/bench.json
	@python3 bench/strong_scaling.py $(BUILD) build/bench.json
endif

clean:
	rm -rf build

-include $(shell find $(sort $(BUILD)/obj $(PLAIN_BUILD)/obj) $(FUZZ)/obj -name '*.d' 2>/dev/null)
