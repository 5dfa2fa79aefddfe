# goro: Go-style concurrency for C.
#
#   make              build/libgoro.a and build/libgoro.so
#   make run          build everything and start the main sample
#   make test         the Check suite (also: test-asan test-tsan test-valgrind
#                     test-aarch64)
#   make bench        benchmarks against peers, one line per figure
#   make install      PREFIX=/usr/local DESTDIR=
#   make test-install install into a staging root, link a program to it
#                     through pkg-config (dynamic and -static) and run it
#
# Variants build into their own directories: BUILD=build/asan SANITIZE=...,
# ARCH=aarch64 (cross, static, run under qemu-user).

ARCH ?= $(shell uname -m)
BUILD ?= build
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BINDIR ?= $(PREFIX)/bin
DESTDIR ?=
SANITIZE ?=
OPT ?= -O2

VERSION_MAJOR := 0
VERSION := 0.1.0
SONAME := libgoro.so.$(VERSION_MAJOR)

# Cross build for aarch64 on another host: the Debian cross gcc, a sysroot
# of arm64 static archives that tools/aarch64-sysroot.sh unpacks on first use
# (libunwind, liblzma, Check, subunit, libevent), -static linking (dynamic
# aarch64 programs that create threads hang in pthread_create under qemu-user
# 7.2), and qemu-user to run the result, with GORO_TEST_SLOW=1 (the tests
# shrink their loop counts and stretch their timeouts for the emulator).
ifeq ($(ARCH),aarch64)
  ifneq ($(shell uname -m),aarch64)
    CROSS ?= aarch64-linux-gnu-
    SYSROOT ?= $(abspath build/aarch64/sysroot)
    SYSROOT_STAMP := $(SYSROOT)/.goro-sysroot-stamp
    STATIC := 1
    RUNNER ?= env GORO_TEST_SLOW=1 qemu-aarch64
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
LIBS := $(EVENT_LIBS) $(UNWIND_LIBS) -lpthread -lm -lrt
ALL_CFLAGS = $(BASE_CFLAGS) $(SYS_CFLAGS) $(SAN_FLAGS) $(CFLAGS)
ALL_LDFLAGS = $(SYS_LDFLAGS) $(SAN_FLAGS) $(if $(STATIC),-static) $(LDFLAGS)

LIB_SRCS := $(wildcard runtime/*.c runtime/*/*.c)
ARCH_SRCS := $(wildcard arch/$(ARCH)/*.S)
LIB_OBJS := $(LIB_SRCS:%.c=$(BUILD)/obj/%.o) $(ARCH_SRCS:%.S=$(BUILD)/obj/%.o)
HEADERS := include/goro.h $(wildcard runtime/*.h runtime/*/*.h) $(wildcard arch/$(ARCH)/*.h)

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
TEST_LIBS := $(if $(TEST_SQLITE),-lsqlite3) $(if $(TEST_ZLIB),-lz) -Wl,--wrap=close
TEST_BIN := $(BUILD)/tests/goro_tests

SAMPLE_BIN := $(BUILD)/samples/hello $(BUILD)/samples/fetch $(BUILD)/samples/pipeline
FETCH_BIN := $(BUILD)/samples/fetch
PIPELINE_BIN := $(BUILD)/samples/pipeline

DEPS_STAMP := build/.deps-ok

# The echo server sample (ECHOD_BIN, ECHOLOAD_BIN): before `all`, which names them.
include samples/echod/echod.mk

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

all: lib $(SAMPLE_BIN) $(ECHOD_BIN) $(ECHOLOAD_BIN)

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

# A static link (pkg-config --static) needs goro's dependencies and theirs:
# libunwind's archive calls liblzma, libevent_pthreads' calls libevent.
# Requires.private names the packages whose .pc files say so (Debian's
# libevent-dev and libunwind-dev ship them); Libs.private adds the system
# libraries of LIBS. A dynamic link needs only -lgoro: libgoro.so records
# its own dependencies. Written afresh on every install: it holds PREFIX,
# which may differ from the last run's.
.PHONY: $(BUILD)/goro.pc
$(BUILD)/goro.pc:
	@mkdir -p $(@D)
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$(INCLUDEDIR)' '' \
	  'Name: goro' 'Description: Go-style concurrency for C' 'Version: $(VERSION)' \
	  'Requires.private: libevent_pthreads libevent_core libunwind' \
	  'Libs: -L$${libdir} -lgoro' 'Libs.private: -lpthread -lm -lrt' \
	  'Cflags: -I$${includedir} $(STACK_CLASH)' > $@

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
# and run after the C suite. The aarch64 cross build has no C++ cross
# compiler wired, so it goes without them.
CXX_GCC ?= g++
CXX_CLANG ?= clang++
CXX_TEST_SRCS := $(wildcard tests/cxx/*.cc)
CXX_TEST_COMPILERS := $(if $(SYSROOT),,gcc clang)
CXX_TEST_BINS := $(CXX_TEST_COMPILERS:%=$(BUILD)/tests/goro_cxx_tests_%)
CXX_TEST_FLAGS = -std=c++17 -Wall -Wextra -Werror -pthread -fno-omit-frame-pointer \
    $(STACK_CLASH) -Iinclude $(SAN_FLAGS) $(OPT) -g

# $(1): gcc or clang, $(2): the compiler
define cxx_tests
$$(BUILD)/obj/tests/cxx/$(1)/%.o: tests/cxx/%.cc include/goro.h $$(wildcard tests/cxx/*.h) $$(DEPS_STAMP)
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

.PHONY: test-cxx
test-cxx: $(CXX_TEST_BINS)
	$(if $(CXX_TEST_BINS),$(foreach t,$(CXX_TEST_BINS),$(RUNNER) $(t) &&) true,\
	  @echo "C++ tests skipped: no C++ cross compiler is wired for ARCH=$(ARCH)")

# The C++ go()'s spawn cost next to the plain C spawn (bench/spawn gives
# the C go() macro's); not part of `make bench`.
.PHONY: bench-cxx-spawn
bench-cxx-spawn: $(BUILD)/bench/cxx_spawn
	$(BUILD)/bench/cxx_spawn

$(BUILD)/bench/cxx_spawn: bench/cxx_spawn.cc include/goro.h $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CXX_GCC) $(CXX_TEST_FLAGS) $(ALL_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

# runtime/'s calls go down its layers, or through a named contract
# (tools/check-layers.py, docs/architecture.md).
.PHONY: check-layers
check-layers:
	python3 tools/check-layers.py

test: $(TEST_BIN) $(CXX_TEST_BINS) check-layers
	$(RUNNER) $(TEST_BIN)
	$(MAKE) --no-print-directory test-cxx
	$(MAKE) --no-print-directory test-echod
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
install: lib $(BUILD)/goro.pc
	install -d $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(BINDIR)
	install -m 644 include/goro.h $(DESTDIR)$(INCLUDEDIR)/goro.h
	install -m 644 $(STATIC_LIB) $(DESTDIR)$(LIBDIR)/libgoro.a
	install -m 755 $(SHARED_REAL) $(DESTDIR)$(LIBDIR)/libgoro.so.$(VERSION)
	ln -sf libgoro.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf libgoro.so.$(VERSION) $(DESTDIR)$(LIBDIR)/libgoro.so
	install -m 644 $(BUILD)/goro.pc $(DESTDIR)$(LIBDIR)/pkgconfig/goro.pc
	install -m 755 tools/goro-trace-svg $(DESTDIR)$(BINDIR)/goro-trace-svg
	$(MAKE) --no-print-directory install-gdb

# The installed library as a program sees it: install into a staging root,
# build samples/hello against it with pkg-config - dynamically, and with
# -static, which needs every private dependency in goro.pc - and run both.
# Native builds only. (glibc warns that a static getaddrinfo needs its
# shared libraries at run time: expected.)
INSTALL_STAGE := $(abspath $(BUILD)/install-stage)
INSTALL_TEST := $(BUILD)/install-test
STAGE_PKG_CONFIG := PKG_CONFIG_SYSROOT_DIR=$(INSTALL_STAGE) \
    PKG_CONFIG_PATH=$(INSTALL_STAGE)$(LIBDIR)/pkgconfig pkg-config

.PHONY: test-install
test-install: $(DEPS_STAMP)
	rm -rf $(INSTALL_STAGE) $(INSTALL_TEST)
	$(MAKE) --no-print-directory install DESTDIR=$(INSTALL_STAGE) >/dev/null
	@mkdir -p $(INSTALL_TEST)
	$(CC) -o $(INSTALL_TEST)/hello-dynamic samples/hello/main.c \
	  $$($(STAGE_PKG_CONFIG) --cflags --libs goro)
	$(CC) -static -o $(INSTALL_TEST)/hello-static samples/hello/main.c \
	  $$($(STAGE_PKG_CONFIG) --cflags goro) $$($(STAGE_PKG_CONFIG) --static --libs goro)
	LD_LIBRARY_PATH=$(INSTALL_STAGE)$(LIBDIR) $(INSTALL_TEST)/hello-dynamic >$(INSTALL_TEST)/dynamic.out
	$(INSTALL_TEST)/hello-static >$(INSTALL_TEST)/static.out
	$(INSTALL_STAGE)$(BINDIR)/goro-trace-svg --help >/dev/null
	@tail -n 1 $(INSTALL_TEST)/dynamic.out $(INSTALL_TEST)/static.out

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/goro.h $(DESTDIR)$(LIBDIR)/libgoro.a \
	  $(DESTDIR)$(LIBDIR)/libgoro.so* $(DESTDIR)$(LIBDIR)/pkgconfig/goro.pc

clean:
	rm -rf build
