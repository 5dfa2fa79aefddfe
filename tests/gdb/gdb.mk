# The gdb extension and the debugging tests; included by the top Makefile.
#
#   make test-gdb    the extension on a live process, on a core written by
#                    gdb and on the core of a crash, at -O0 and -O2; the
#                    aarch64 core of a crash under qemu-user; goro_dump, the
#                    SIGQUIT dump and the crash report (tests/gdb/run.sh)
#
# GDB_AARCH64=0 leaves the aarch64 part out.

GDB_SCRIPT := gdb/goro_gdb.py
GDB_FIXTURE := $(BUILD)/tests/gdb/fixture
GDB_AARCH64 ?= 1
HOST_ARCH := $(shell uname -m)

.PHONY: gdb-fixture test-gdb install-gdb

# The library embeds the script (runtime/debug/registry.c, .incbin).
$(BUILD)/obj/runtime/debug/registry.o: $(GDB_SCRIPT)

$(GDB_FIXTURE): tests/gdb/fixture.c $(PUBLIC_HEADERS) $(STATIC_LIB)
	@mkdir -p $(@D)
	$(call say,LINK,$@)
	$(Q)$(CC) $(ALL_CFLAGS) $(ALL_LDFLAGS) -o $@ $< $(STATIC_LIB) $(LIBS)

gdb-fixture: $(GDB_FIXTURE)

# One build per variant, each in its own directory; then one run over all.
GDB_VARIANTS := $(HOST_ARCH):$(BUILD)/gdb-O0/tests/gdb/fixture \
                $(HOST_ARCH):$(BUILD)/gdb-O2/tests/gdb/fixture
ifeq ($(GDB_AARCH64),1)
ifneq ($(HOST_ARCH),aarch64)
GDB_VARIANTS += aarch64:$(BUILD)/gdb-aarch64/tests/gdb/fixture
endif
endif

test-gdb: $(DEPS_STAMP)
	tools/deps.sh gdb
	$(MAKE) BUILD=$(BUILD)/gdb-O0 OPT=-O0 gdb-fixture
	$(MAKE) BUILD=$(BUILD)/gdb-O2 OPT=-O2 gdb-fixture
	$(if $(filter aarch64:%,$(GDB_VARIANTS)),$(MAKE) ARCH=aarch64 BUILD=$(BUILD)/gdb-aarch64 gdb-fixture)
	tests/gdb/run.sh $(GDB_VARIANTS)

# gdb looks for <real path of an object>-gdb.py under its auto-load
# directory: this copy serves the shared library when its
# .debug_gdb_scripts section was stripped.
GDB_AUTOLOAD_DIR := $(PREFIX)/share/gdb/auto-load$(LIBDIR)

install-gdb:
	install -d $(DESTDIR)$(GDB_AUTOLOAD_DIR)
	install -m 644 $(GDB_SCRIPT) $(DESTDIR)$(GDB_AUTOLOAD_DIR)/libgoro.so.$(VERSION)-gdb.py
