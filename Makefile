# goro: Go-style concurrency for C.
#
#   make              build/libgoro.a and build/libgoro.so
#   make run          build everything and start the main sample
#   make test         the Check suite (also: test-asan test-tsan test-valgrind
#                     test-aarch64)
#   make test-strict  every spawn form in strict ISO C and C++17/20 modes
#   make bench        benchmarks against peers, one line per figure
#   make install      PREFIX=/usr/local DESTDIR= (make uninstall: the same)
#   make test-install install into a fresh prefix; build C and C++ programs
#                     against it (shared and -static, pkg-config and CMake),
#                     run them, check the man pages, uninstall
#
# Variants build into their own directories: BUILD=build/asan SANITIZE=...,
# ARCH=aarch64 (cross, static, run under qemu-user).

ARCH ?= $(shell uname -m)
BUILD ?= build
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
DATADIR ?= $(PREFIX)/share
DOCDIR ?= $(DATADIR)/doc/goro
MANDIR ?= $(DATADIR)/man
CMAKEDIR ?= $(LIBDIR)/cmake/goro
DESTDIR ?=
SANITIZE ?=
OPT ?= -O2

VERSION_MAJOR := 0
VERSION := 0.1.0
SONAME := libgoro.so.$(VERSION_MAJOR)

# Cross build for aarch64 on another host: the Debian cross gcc, a sysroot
# of arm64 static archives that tools/aarch64-sysroot.sh unpacks on first use
# (libunwind, liblzma, Check, subunit, libevent, liburing), -static linking (dynamic
# aarch64 programs that create threads hang in pthread_create under qemu-user
# 7.2), and qemu-user to run the result, with GORO_TEST_SLOW=1 (the tests
# shrink their loop counts and stretch their timeouts for the emulator).
# QEMU_LD_PREFIX=/: with Debian's default prefix qemu-user looks every
# absolute path up under a lock of its own, and a fork (posix_spawn is one,
# under the emulator) taken while another thread holds that lock leaves
# the child waiting for it for ever: process_no_pidfd_fallback hung so,
# about one suite run in 100 (the child stuck in qemu's path(), gdb). With
# "/" the lookup is off; the programs are static, so nothing else changes.
ifeq ($(ARCH),aarch64)
  ifneq ($(shell uname -m),aarch64)
    CROSS ?= aarch64-linux-gnu-
    SYSROOT ?= $(abspath build/aarch64/sysroot)
    SYSROOT_STAMP := $(SYSROOT)/.goro-sysroot-stamp
    STATIC := 1
    RUNNER ?= env GORO_TEST_SLOW=1 QEMU_LD_PREFIX=/ qemu-aarch64
    CC := $(CROSS)gcc
  endif
endif

WARN := -Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes
CFLAGS ?= $(OPT) -g
# Stack-clash protection: a frame larger than the probe interval touches
# the stack on its way down, so a large local array faults in the guard
# below a coroutine's stack instead of jumping over it into the next one
# (docs/api.md, "Stacks"). goro.pc passes it on to programs.
STACK_CLASH := $(shell $(CC) -fstack-clash-protection -Werror -S -o /dev/null -x c /dev/null \
    >/dev/null 2>&1 && echo -fstack-clash-protection)
BASE_CFLAGS := -std=gnu11 $(WARN) -pthread -fno-omit-frame-pointer $(STACK_CLASH) \
    -Iinclude -Iarch/$(ARCH) -Iruntime
LIB_CFLAGS := -fPIC -fvisibility=hidden

ifdef SYSROOT
  SYS_CFLAGS := -I$(SYSROOT)/usr/include -I$(SYSROOT)/usr/include/aarch64-linux-gnu
  SYS_LDFLAGS := -L$(SYSROOT)/usr/lib/aarch64-linux-gnu
endif
ifdef SANITIZE
  SAN_FLAGS := -fsanitize=$(SANITIZE) -fno-sanitize-recover=all
endif

UNWIND_LIBS := $(if $(STATIC),-lunwind-$(ARCH) -lunwind -llzma,-lunwind)
CHECK_LIBS := $(if $(STATIC),-lcheck -lsubunit,$(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit))
EVENT_LIBS := -levent_pthreads -levent_core
LIBS := $(EVENT_LIBS) -luring $(UNWIND_LIBS) -lpthread -lm -lrt
ALL_CFLAGS = $(BASE_CFLAGS) $(SYS_CFLAGS) $(SAN_FLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SYS_LDFLAGS) $(SAN_FLAGS) $(if $(STATIC),-static) $(LDFLAGS)

LIB_SRCS := $(wildcard runtime/*.c runtime/*/*.c)
ARCH_SRCS := $(wildcard arch/$(ARCH)/*.S)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(ARCH_SRCS:%.S=$(BUILD)/obj/%.o)
# The public headers: goro.h, and goro/*.h beside it, which it includes.
PUBLIC_HEADERS := include/goro.h $(wildcard include/goro/*.h)
HEADERS := $(PUBLIC_HEADERS) $(wildcard runtime/*.h runtime/*/*.h) $(wildcard arch/$(ARCH)/*.h)

STATIC_LIB := $(BUILD)/libgoro.a
SHARED_LIB := $(BUILD)/libgoro.so
SHARED_REAL := $(BUILD)/libgoro.so.$(VERSION)

TEST_SRCS := $(wildcard tests/*.c)
TEST_ASM := $(wildcard tests/arch/$(ARCH)/*.S)
TEST_OBJS := $(TEST_SRCS:%.c=$(BUILD)/obj/%.o) $(TEST_ASM:%.S=$(BUILD)/obj/%.o)
# The tests use SQLite as a real program's foreign locks (libsqlite3-dev, a
# core dependency); the aarch64 sysroot has none, so that cross build goes
# without those tests.
TEST_SQLITE := $(if $(SYSROOT),,1)
# zlib (zlib1g-dev, a core dependency) is the library a stall test spends
# its time in; the aarch64 sysroot has none either.
TEST_ZLIB := $(if $(SYSROOT),,1)
TEST_CFLAGS := $(if $(TEST_SQLITE),-DGORO_TEST_SQLITE) $(if $(TEST_ZLIB),-DGORO_TEST_ZLIB)
TEST_LIBS := $(if $(TEST_SQLITE),-lsqlite3) $(if $(TEST_ZLIB),-lz) -Wl,--wrap=close -Wl,--wrap=poll
TEST_BIN := $(BUILD)/tests/goro_tests

SAMPLE_BIN := $(BUILD)/samples/hello $(BUILD)/samples/fetch $(BUILD)/samples/pipeline \
              $(BUILD)/samples/deadline
FETCH_BIN := $(BUILD)/samples/fetch
PIPELINE_BIN := $(BUILD)/samples/pipeline

DEPS_STAMP := build/.deps-ok

# The echo server sample (ECHOD_BIN, ECHOLOAD_BIN): before `all`, which names them.
# libgoro-tls (TLS_* variables, test-tls, install-tls); echod links it.
include tls/tls.mk
include samples/echod/echod.mk
# The static file server sample (HTTPD_BIN).
include samples/httpd/httpd.mk

# V=1 shows full command lines.
ifeq ($(V),1)
  Q :=
  say = @true
else
  Q := @
  say = @printf '  %-6s %s\n' $(1) $(2)
endif

.PHONY: all lib run test test-asan test-tsan test-valgrind test-aarch64 bench \
        install uninstall clean deps check-all test-gdb
.DELETE_ON_ERROR:

all: lib $(SAMPLE_BIN) $(ECHOD_BIN) $(ECHOLOAD_BIN) $(HTTPD_BIN)

lib: $(STATIC_LIB) $(if $(STATIC),,$(SHARED_LIB))

# ---- dependencies (Debian packages) ----
deps $(DEPS_STAMP):
	@tools/deps.sh
	@mkdir -p build && touch $(DEPS_STAMP)

# ---- the library ----
# goro's own code goes to a section of its own, goro_text, so that the
# preemption signal handler can tell it apart (__start_/__stop_goro_text)
# even when the library is linked into the executable: goro is never
# preempted asynchronously. Cold/hot splitting is off so that all of it is
# in .text to begin with.
TEXT_RENAME := $(foreach s,.text .text.unlikely .text.hot .text.startup .text.exit,\
    --rename-section $(s)=goro_text)
NO_SPLIT := -fno-reorder-blocks-and-partition -fno-reorder-functions
LIB_CFLAGS += $(shell $(CC) $(NO_SPLIT) -Werror -E -x c /dev/null >/dev/null 2>&1 && echo $(NO_SPLIT))
# gcc on x86-64 clears and copies more than 64 constant bytes with `rep
# stos`/`rep movs`, whose start-up costs more than a record's whole clear
# (270 bytes: 13-17 ns against 4-5 with 16-byte stores, measured): vector
# loops up to 512 bytes instead (a spawn clears 208, an I/O call 88).
STRINGOPS := -mmemset-strategy=vector_loop:512:noalign,libcall:-1:noalign \
    -mmemcpy-strategy=vector_loop:512:noalign,libcall:-1:noalign
LIB_CFLAGS += $(shell $(CC) $(STRINGOPS) -Werror -c -x c /dev/null -o /dev/null >/dev/null 2>&1 && echo $(STRINGOPS))

# aarch64: gcc makes each atomic a call into libgcc's helpers
# (-moutline-atomics), which land in the executable's text when goro is
# linked into it - a safe point for preemption, in the middle of goro's
# own code. Inline instead (aarch64 only; other targets refuse the flag).
NO_OUTLINE := -mno-outline-atomics
LIB_CFLAGS += $(shell $(CC) $(NO_OUTLINE) -Werror -c -x c /dev/null -o /dev/null >/dev/null 2>&1 && echo $(NO_OUTLINE))

# goro_once finishes its once in a cleanup handler when an unwind (C++:
# goro_exit, an exception) passes through it (runtime/wait/sync.c).
$(BUILD)/obj/runtime/wait/sync.o: LIB_CFLAGS += -fexceptions

# Makefile: the section renaming must never be skipped by a stale object.
$(BUILD)/obj/runtime/%.o: runtime/%.c $(HEADERS) Makefile $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c $< -o $@
	$(Q)$(CROSS)objcopy $(TEXT_RENAME) $@

$(BUILD)/obj/arch/%.o: arch/%.S $(wildcard arch/$(ARCH)/*.h) Makefile $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,AS,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c $< -o $@
	$(Q)$(CROSS)objcopy $(TEXT_RENAME) $@

$(BUILD)/obj/%.o: %.c $(HEADERS) $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.S $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,AS,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(LIB_CFLAGS) -c $< -o $@

$(STATIC_LIB): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(call say,AR,$@)
	$(Q)rm -f $@ && $(CROSS)ar rcs $@ $^

$(SHARED_REAL): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--no-undefined $(ALL_LDFLAGS) -o $@ $^ $(LIBS)

$(SHARED_LIB): $(SHARED_REAL)
	$(Q)ln -sf libgoro.so.$(VERSION) $(BUILD)/$(SONAME)
	$(Q)ln -sf libgoro.so.$(VERSION) $@

# A static link (pkg-config --static) needs goro's dependencies and theirs,
# named in Libs.private with plain -l flags: libunwind's archive calls
# liblzma; libgcc_eh comes before libunwind, since both define the _Unwind_*
# entry points and a C++ program's must be libgcc's, the unwinder libstdc++
# throws with (libunwind's first: "multiple definition of _Unwind_Resume").
# No Requires.private: libunwind.pc's Cflags would add its system include
# directory to every user's -I list. A dynamic link needs only -lgoro:
# libgoro.so records its own dependencies. The rpath variable is the
# opt-in for a library outside the loader's directories:
#   cc prog.c $(pkg-config --cflags --libs goro) $(pkg-config --variable=rpath goro)
# Written afresh on every install: it holds PREFIX, which may differ from
# the last run's.
STATIC_PRIVATE := -levent_pthreads -levent_core -luring -lgcc_eh -lunwind -llzma -lpthread -lm -lrt
.PHONY: $(BUILD)/goro.pc $(BUILD)/cmake
$(BUILD)/goro.pc:
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' \
	  'rpath=-Wl,-rpath,$${libdir}' '' \
	  'Name: goro' 'Description: Go-style concurrency for C' 'Version: $(VERSION)' \
	  'Libs: -L$${libdir} -lgoro' 'Libs.private: $(STATIC_PRIVATE)' \
	  'Cflags: -I$${includedir} $(STACK_CLASH)' > $@

# find_package(goro): tools/cmake/*.in with the install's paths.
CMAKE_SUBST = sed -e 's|@LIBDIR@|$(LIBDIR)|g' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' \
    -e 's|@VERSION@|$(VERSION)|g' -e 's|@MAJOR@|$(VERSION_MAJOR)|g' \
    -e 's|@MINOR@|$(word 2,$(subst ., ,$(VERSION)))|g' -e 's|@CFLAGS@|$(STACK_CLASH)|g' \
    -e 's|@STATIC_LIBS@|$(subst $(space),;,$(patsubst -l%,%,$(STATIC_PRIVATE)))|g'
empty :=
space := $(empty) $(empty)
$(BUILD)/cmake:
	@mkdir -p $@
	$(CMAKE_SUBST) tools/cmake/goroConfig.cmake.in > $@/goroConfig.cmake
	$(CMAKE_SUBST) tools/cmake/goroConfigVersion.cmake.in > $@/goroConfigVersion.cmake

# Section 3 man pages, one per family, from the comments of goro.h and the
# goro/ headers it includes (tools/gen-man.py), each function name a .so
# page pointing at its family.
MAN_STAMP := $(BUILD)/man/.stamp
$(MAN_STAMP): $(PUBLIC_HEADERS) tools/gen-man.py
	@rm -rf $(BUILD)/man && mkdir -p $(BUILD)/man/man3
	$(call say,GEN,$(BUILD)/man/man3)
	$(Q)python3 tools/gen-man.py include/goro.h $(BUILD)/man/man3 $(VERSION) >/dev/null
	@touch $@

# ---- samples ----
$(BUILD)/samples/%: samples/%/main.c $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

run: all
	$(ECHOD_BIN)

# The fan-out sample: groups, deadlines, error objects, single-flight.
.PHONY: run-fetch test-fetch
run-fetch: $(FETCH_BIN)
	$(FETCH_BIN)

# Its four scenarios must end as they say (exit status 0).
test-fetch: $(FETCH_BIN)
	$(RUNNER) $(FETCH_BIN) > $(BUILD)/fetch.out || { cat $(BUILD)/fetch.out; exit 1; }
	@echo "fetch: its four scenarios ended as they should"

# The pipeline sample: a request log through parse and hash, the workers
# following the bottleneck; its log and its SVG timeline go to $(BUILD)/pipeline/.
.PHONY: run-pipeline test-pipeline
run-pipeline: $(PIPELINE_BIN)
	@mkdir -p $(BUILD)/pipeline
	$(PIPELINE_BIN) -f $(BUILD)/pipeline/requests.csv -o $(BUILD)/pipeline/timeline.svg

# A short log; the pipeline's result must equal a plain loop's (exit 0).
test-pipeline: $(PIPELINE_BIN)
	@mkdir -p $(BUILD)/pipeline-test
	@rm -f $(BUILD)/pipeline-test/requests.csv
	$(RUNNER) $(PIPELINE_BIN) -q -n 2000 -f $(BUILD)/pipeline-test/requests.csv \
	    -o $(BUILD)/pipeline-test/timeline.svg > $(BUILD)/pipeline-test/out || \
	    { cat $(BUILD)/pipeline-test/out; exit 1; }
	@grep -q '</svg>' $(BUILD)/pipeline-test/timeline.svg
	@echo "pipeline: the sample's result equals the plain loop's"

# ---- tests ----
$(TEST_BIN): $(TEST_OBJS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -rdynamic -o $@ $(TEST_OBJS) $(STATIC_LIB) $(CHECK_LIBS) $(TEST_LIBS) $(LIBS)

$(BUILD)/obj/tests/%.o: tests/%.c $(HEADERS) $(wildcard tests/*.h) $(DEPS_STAMP) $(SYSROOT_STAMP)
	@mkdir -p $(@D)
	$(call say,CC,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) -Itests -c $< -o $@

# ---- C++ tests (tests/cxx/, docs/cxx.md) ----
# The C++ forms of goro.h and the exception state per coroutine, built by
# g++ and by clang++ - one binary each, linked against the static library -
# and run after the C suite; unsanitized builds add a g++ one without PIE
# (its PLT stubs hold addresses dlsym returns: tests/cxx/test_preempt.cc).
# The aarch64 cross build has no C++ cross compiler wired, so it goes
# without them.
CXX_GCC ?= g++
CXX_CLANG ?= clang++
CXX_TEST_SRCS := $(wildcard tests/cxx/*.cc)
CXX_TEST_COMPILERS := $(if $(SYSROOT),,gcc clang $(if $(SANITIZE),,nopie))
CXX_TEST_BINS := $(CXX_TEST_COMPILERS:%=$(BUILD)/tests/goro_cxx_tests_%)
CXX_TEST_FLAGS = -std=c++17 -Wall -Wextra -Werror -pthread -fno-omit-frame-pointer \
    $(STACK_CLASH) -Iinclude $(SAN_FLAGS) $(OPT) -g

# $(1): the binary's suffix, $(2): the compiler and its own flags
define cxx_tests
$$(BUILD)/obj/tests/cxx/$(1)/%.o: tests/cxx/%.cc $$(PUBLIC_HEADERS) $$(wildcard tests/cxx/*.h) $$(DEPS_STAMP)
	@mkdir -p $$(@D)
	$$(call say,CXX,$$@)
	$$(Q)$(2) $$(CXX_TEST_FLAGS) -c $$< -o $$@

$$(BUILD)/tests/goro_cxx_tests_$(1): $$(CXX_TEST_SRCS:tests/cxx/%.cc=$$(BUILD)/obj/tests/cxx/$(1)/%.o) $$(STATIC_LIB)
	@mkdir -p $$(@D)
	$$(call say,LINK,$$@)
	$$(Q)$(2) $$(CXX_TEST_FLAGS) $$(ALL_LDFLAGS) -rdynamic -o $$@ $$(filter %.o,$$^) $$(STATIC_LIB) $$(LIBS)
endef
$(eval $(call cxx_tests,gcc,$(CXX_GCC)))
$(eval $(call cxx_tests,clang,$(CXX_CLANG)))
$(eval $(call cxx_tests,nopie,$(CXX_GCC) -fno-pie -no-pie))

.PHONY: test-cxx
test-cxx: $(CXX_TEST_BINS)
	$(if $(CXX_TEST_BINS),$(foreach t,$(CXX_TEST_BINS),$(RUNNER) $(t) &&) true,\
	  @echo "C++ tests skipped: no C++ cross compiler is wired for ARCH=$(ARCH)")

# The C++ go()'s spawn cost next to the plain C spawn (bench/spawn gives
# the C go() macro's); not part of `make bench`.
.PHONY: bench-cxx-spawn
bench-cxx-spawn: $(BUILD)/bench/cxx_spawn
	$(BUILD)/bench/cxx_spawn

$(BUILD)/bench/cxx_spawn: bench/cxx_spawn.cc $(PUBLIC_HEADERS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CXX_GCC) $(CXX_TEST_FLAGS) $(ALL_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# ---- strict modes (tests/strict/) ----
# Every spawn form, as a user compiles it: ISO C (c11, c17, c2x) and GNU C
# (gnu11) with -pedantic -Wall -Wextra -Werror, by gcc and by clang; C++17
# and C++20 likewise. Each build is run. Each public header, named alone,
# compiles as C11 and C++17 (it brings the others). Then two programs that must not
# compile, and the first line the compiler gives for each: a two-field
# attribute written into goro_go names GORO_ATTR, and C++14 gets goro.h's
# one #error line and nothing more. Native builds only.
STRICT := $(BUILD)/strict
STRICT_FLAGS := -pedantic -Wall -Wextra -Werror -pthread -Iinclude
STRICT_C_MODES := c11 c17 c2x gnu11
STRICT_CXX_MODES := c++17 c++20

.PHONY: test-strict
test-strict: $(STATIC_LIB)
	@mkdir -p $(STRICT)
	@set -e; for cc in gcc clang; do for std in $(STRICT_C_MODES); do \
	  echo "  STRICT $$cc -std=$$std"; \
	  $$cc -std=$$std $(STRICT_FLAGS) -o $(STRICT)/c-$$cc-$$std tests/strict/spawn_forms.c \
	    $(STATIC_LIB) $(LIBS); \
	  $(STRICT)/c-$$cc-$$std >/dev/null; \
	done; done
	@set -e; for cxx in $(CXX_GCC) $(CXX_CLANG); do for std in $(STRICT_CXX_MODES); do \
	  echo "  STRICT $$cxx -std=$$std"; \
	  $$cxx -std=$$std $(STRICT_FLAGS) -o $(STRICT)/cxx-$$cxx-$$std tests/strict/spawn_forms.cc \
	    $(STATIC_LIB) $(LIBS); \
	  $(STRICT)/cxx-$$cxx-$$std >/dev/null; \
	done; done
	@set -e; for h in $(PUBLIC_HEADERS:include/%=%); do \
	  echo "  STRICT <$$h> alone, C11 and C++17, gcc and clang"; \
	  for cc in "gcc -std=c11" "clang -std=c11" "$(CXX_GCC) -x c++ -std=c++17" \
	            "$(CXX_CLANG) -x c++ -std=c++17"; do \
	    $$cc $(STRICT_FLAGS) '-DGORO_ALONE=<'$$h'>' -fsyntax-only tests/strict/alone.c; \
	  done; done
	@set -e; for cc in gcc clang; do \
	  if $$cc -std=c11 -Iinclude -fsyntax-only tests/strict/attr_commas.c >$(STRICT)/attr.out 2>&1; then \
	    echo "tests/strict/attr_commas.c compiled with $$cc"; exit 1; fi; \
	  grep -m1 'error' $(STRICT)/attr.out | grep -q GORO_ATTR || \
	    { echo "$$cc: the first error does not name GORO_ATTR:"; cat $(STRICT)/attr.out; exit 1; }; \
	done
	@set -e; for cxx in $(CXX_GCC) $(CXX_CLANG); do \
	  if $$cxx -std=c++14 -Iinclude -fsyntax-only tests/strict/old_cxx.cc >$(STRICT)/cxx14.out 2>&1; then \
	    echo "tests/strict/old_cxx.cc compiled with $$cxx -std=c++14"; exit 1; fi; \
	  test "$$(grep -c 'error:' $(STRICT)/cxx14.out)" = 1 && grep -q 'C++17' $(STRICT)/cxx14.out || \
	    { echo "$$cxx -std=c++14: want one error naming C++17:"; cat $(STRICT)/cxx14.out; exit 1; }; \
	done
	@echo "strict: every spawn form in C11/C17/C2x/GNU11 and C++17/20, gcc and clang; each header alone; the two errors as they should read"

# runtime/'s calls and #includes go down its layers, or through a named
# contract, as the face headers say; the map in docs/architecture.md is
# theirs (tools/check-layers.py; --markdown writes it anew).
.PHONY: check-layers
check-layers:
	python3 tools/check-layers.py

test: $(TEST_BIN) $(CXX_TEST_BINS) check-layers
	$(RUNNER) $(TEST_BIN)
	$(MAKE) --no-print-directory test-cxx
	$(MAKE) --no-print-directory test-tls
	$(MAKE) --no-print-directory test-echod
	$(MAKE) --no-print-directory test-httpd
	$(MAKE) --no-print-directory test-fetch
	$(MAKE) --no-print-directory test-pipeline

# The ASan build also checks the runtime's rules (GORO_DEBUG, below): one
# run of the suites instead of two.
test-asan:
	$(MAKE) BUILD=build/asan SANITIZE=address,undefined OPT=-O1 CFLAGS="-O1 -g -DGORO_DEBUG" test

test-tsan:
	$(MAKE) BUILD=build/tsan SANITIZE=thread OPT=-O1 test

# GORO_DEBUG: runtime locks record their holder and abort with a message
# when a thread takes one it holds (a goro call from a signal handler).
# CI checks these rules in test-asan; this is the optimised build alone.
.PHONY: test-debug
test-debug:
	$(MAKE) BUILD=build/debug CFLAGS="$(OPT) -g -DGORO_DEBUG" test

# --fair-sched=yes: valgrind runs one thread at a time, and its default
# lock lets a spinning thread starve the others (tests spin on purpose).
# One process runs every test (no fork under valgrind), so Check's per-test
# timeouts do not apply: the whole run has one instead.
test-valgrind: $(TEST_BIN)
	CK_FORK=no GORO_TEST_VALGRIND=1 timeout --kill-after=10 1200 \
	  valgrind --fair-sched=yes --error-exitcode=9 --quiet \
	  --suppressions=tests/valgrind.supp $(TEST_BIN)

# The host packages first (deps.sh and the sysroot script both use apt,
# which must not run twice at once), then the cross build in its own make.
test-aarch64: $(DEPS_STAMP)
	$(MAKE) ARCH=aarch64 BUILD=build/aarch64 test

ifdef SYSROOT_STAMP
$(SYSROOT_STAMP): | $(DEPS_STAMP)
	tools/aarch64-sysroot.sh $(SYSROOT)
endif

include tests/gdb/gdb.mk

# ---- benchmarks ----
include bench/bench.mk

# ---- install ----
# Into a directory the loader searches, as root and with no DESTDIR,
# install runs ldconfig; anywhere else it prints the line a program needs
# to find libgoro.so.0 (tools/post-install.sh). The docs go to DOCDIR as in
# the source tree (README.md, LICENSE, docs/), so the header's and the
# pages' references to docs/api.md hold there too.
DOCS := $(wildcard docs/*.md)
DOC_IMGS := $(wildcard docs/img/*)
install: lib $(BUILD)/goro.pc $(BUILD)/cmake $(MAN_STAMP)
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR) \
	  $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(MANDIR)/man3 $(DESTDIR)$(DOCDIR)/docs/img \
	  $(DESTDIR)$(INCLUDEDIR)/goro
	install -m 644 include/goro.h $(DESTDIR)$(INCLUDEDIR)/goro.h
	install -m 644 $(wildcard include/goro/*.h) $(DESTDIR)$(INCLUDEDIR)/goro/
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/libgoro.a
	install -m 755 $(SHARED_REAL) $(DESTDIR)$(LIBDIR)/libgoro.so.$(VERSION)
	ln -sf libgoro.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf libgoro.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libgoro.so
	install -m 644 $(BUILD)/goro.pc $(DESTDIR)$(LIBDIR)/pkgconfig/goro.pc
	install -m 644 $(BUILD)/cmake/goroConfig.cmake $(BUILD)/cmake/goroConfigVersion.cmake \
	  $(DESTDIR)$(CMAKEDIR)/
	install -m 755 tools/goro-trace-svg $(DESTDIR)$(BINDIR)/goro-trace-svg
	install -m 644 $(BUILD)/man/man3/*.3 $(DESTDIR)$(MANDIR)/man3/
	install -m 644 README.md LICENSE $(DESTDIR)$(DOCDIR)/
	install -m 644 $(DOCS) $(DESTDIR)$(DOCDIR)/docs/
	install -m 644 $(DOC_IMGS) $(DESTDIR)$(DOCDIR)/docs/img/
	$(MAKE) --no-print-directory install-gdb
	$(MAKE) --no-print-directory install-tls
	@tools/post-install.sh '$(PREFIX)' '$(LIBDIR)' '$(DESTDIR)'

# Everything install put down, and the directories that were goro's alone.
uninstall: $(MAN_STAMP) uninstall-tls
	rm -f $(DESTDIR)$(INCLUDEDIR)/goro.h $(DESTDIR)$(LIBDIR)/libgoro.a \
	  $(DESTDIR)$(LIBDIR)/libgoro.so $(DESTDIR)$(LIBDIR)/$(SONAME) \
	  $(DESTDIR)$(LIBDIR)/libgoro.so.$(VERSION) $(DESTDIR)$(LIBDIR)/pkgconfig/goro.pc \
	  $(DESTDIR)$(BINDIR)/goro-trace-svg \
	  $(DESTDIR)$(GDB_AUTOLOAD_DIR)/libgoro.so.$(VERSION)-gdb.py
	rm -f $(addprefix $(DESTDIR)$(INCLUDEDIR)/goro/,$(notdir $(wildcard include/goro/*.h)))
	rmdir $(DESTDIR)$(INCLUDEDIR)/goro 2>/dev/null || true
	cd $(BUILD)/man/man3 && for f in *.3; do rm -f $(DESTDIR)$(MANDIR)/man3/$$f; done
	rm -rf $(DESTDIR)$(CMAKEDIR) $(DESTDIR)$(DOCDIR)
	@d=$(DESTDIR)$(GDB_AUTOLOAD_DIR); \
	while [ "$$d" != "$(DESTDIR)$(PREFIX)/share/gdb/auto-load" ] && rmdir "$$d" 2>/dev/null; do \
	  d=$${d%/*}; done

# The installed copy as a new user meets it, from a clean prefix of its
# own (PREFIX, no DESTDIR: the paths in goro.pc and goroConfig.cmake are
# real), with no LD_LIBRARY_PATH: programs find libgoro.so.0 through the
# rpath goro.pc offers. Through pkg-config: tests/install/prog.c shared
# and -static, tests/install/prog.cc (exceptions across coroutines,
# goro_exit unwinding) shared and -static with g++ and clang++, and
# --cflags free of system directories. Through CMake: the same programs
# against goro::goro and goro::goro_static. The man pages render without a
# warning, and `man` finds a function's family page by its name. Then
# uninstall leaves no file behind. Native builds only. (glibc warns that a
# static getaddrinfo needs its shared libraries at run time: expected,
# docs/api.md, "Static linking".)
INSTALL_STAGE := $(abspath $(BUILD)/install-stage)
INSTALL_TEST := $(abspath $(BUILD)/install-test)
STAGE_PC := PKG_CONFIG_PATH=$(INSTALL_STAGE)/lib/pkgconfig pkg-config
# a link's messages, shown when it fails (a static one's are glibc's
# getaddrinfo warnings otherwise)
KEEP_LOG = 2> $(1).log || { cat $(1).log; exit 1; }

.PHONY: test-install
test-install: $(DEPS_STAMP)
	rm -rf $(INSTALL_STAGE) $(INSTALL_TEST)
	@mkdir -p $(INSTALL_TEST)
	$(MAKE) --no-print-directory install PREFIX=$(INSTALL_STAGE) DESTDIR= > $(INSTALL_TEST)/install.out
	@grep -q 'not searched by the loader.*rpath' $(INSTALL_TEST)/install.out || \
	  { echo "install did not print the rpath line:"; cat $(INSTALL_TEST)/install.out; exit 1; }
	@cflags="$$($(STAGE_PC) --cflags goro)"; echo "pkg-config --cflags goro: $$cflags"; \
	  case " $$cflags " in *" -I/usr/include"*) echo "a system include directory"; exit 1;; esac
	cd $(INSTALL_TEST) && \
	$(CC) -o c-shared $(CURDIR)/tests/install/prog.c \
	  $$($(STAGE_PC) --cflags --libs goro) $$($(STAGE_PC) --variable=rpath goro) && \
	$(CC) -static -o c-static $(CURDIR)/tests/install/prog.c \
	  $$($(STAGE_PC) --cflags goro) $$($(STAGE_PC) --static --libs goro) $(call KEEP_LOG,c-static) && \
	$(CXX_GCC) -std=c++17 -o cxx-shared $(CURDIR)/tests/install/prog.cc \
	  $$($(STAGE_PC) --cflags --libs goro) $$($(STAGE_PC) --variable=rpath goro) && \
	$(CXX_GCC) -std=c++17 -static -o cxx-static-gcc $(CURDIR)/tests/install/prog.cc \
	  $$($(STAGE_PC) --cflags goro) $$($(STAGE_PC) --static --libs goro) $(call KEEP_LOG,cxx-static-gcc) && \
	$(CXX_CLANG) -std=c++17 -static -o cxx-static-clang $(CURDIR)/tests/install/prog.cc \
	  $$($(STAGE_PC) --cflags goro) $$($(STAGE_PC) --static --libs goro) $(call KEEP_LOG,cxx-static-clang)
	@cd $(INSTALL_TEST) && for p in c-shared c-static cxx-shared cxx-static-gcc cxx-static-clang; do \
	  env -u LD_LIBRARY_PATH ./$$p > $$p.out || { echo "$$p failed:"; cat $$p.out; exit 1; }; \
	  printf '  %-17s %s\n' $$p "$$(cat $$p.out)"; done
	@ldd $(INSTALL_TEST)/c-shared | grep -q '$(INSTALL_STAGE)/lib/$(SONAME)' || \
	  { echo "c-shared does not load the staged libgoro:"; ldd $(INSTALL_TEST)/c-shared; exit 1; }
	@! ldd $(INSTALL_TEST)/c-shared | grep -q libssl || \
	  { echo "c-shared, without TLS, loads OpenSSL:"; ldd $(INSTALL_TEST)/c-shared; exit 1; }
	cd $(INSTALL_TEST) && $(CC) -o tls-shared $(CURDIR)/tests/install/tls.c \
	  $$($(STAGE_PC) --cflags --libs goro-tls) $$($(STAGE_PC) --variable=rpath goro) && \
	  env -u LD_LIBRARY_PATH ./tls-shared
	env -u LD_LIBRARY_PATH cmake -S tests/install -B $(INSTALL_TEST)/cmake \
	  -DCMAKE_PREFIX_PATH=$(INSTALL_STAGE) -DCMAKE_BUILD_TYPE=Release > $(INSTALL_TEST)/cmake.out
	cmake --build $(INSTALL_TEST)/cmake -j2 > $(INSTALL_TEST)/cmake-build.out 2>&1 || \
	  { cat $(INSTALL_TEST)/cmake-build.out; exit 1; }
	@cd $(INSTALL_TEST)/cmake && for p in prog_shared prog_static prog_cxx_shared prog_cxx_static; do \
	  env -u LD_LIBRARY_PATH ./$$p > $$p.out || { echo "cmake $$p failed:"; cat $$p.out; exit 1; }; \
	  printf '  cmake %-13s %s\n' $$p "$$(cat $$p.out)"; done
	@cd $(INSTALL_STAGE)/share/man/man3 && for f in *.3; do \
	  grep -q '^\.so ' $$f && continue; \
	  w=$$(LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z $$f 2>&1); \
	  [ -z "$$w" ] || { echo "$$f: $$w"; exit 1; }; \
	  MANWIDTH=80 man -l $$f > /dev/null; done
	@MANWIDTH=80 man -M $(INSTALL_STAGE)/share/man 3 goro_chan_send | grep -q 'goro_chan_send' || \
	  { echo "man goro_chan_send does not find goro_chan(3)"; exit 1; }
	@echo "  man pages: $$(ls $(INSTALL_STAGE)/share/man/man3 | wc -l) (families: $$(grep -L '^\.so' $(INSTALL_STAGE)/share/man/man3/*.3 | wc -l)), no groff warning"
	$(INSTALL_STAGE)/bin/goro-trace-svg --help >/dev/null
	$(MAKE) --no-print-directory uninstall PREFIX=$(INSTALL_STAGE) DESTDIR=
	@left=$$(find $(INSTALL_STAGE) -type f -o -type l); [ -z "$$left" ] || \
	  { echo "uninstall left:"; echo "$$left"; exit 1; }
	@echo "test-install: shared and static, C and C++, pkg-config and CMake, man pages; uninstall left no file"

clean:
	rm -rf build
