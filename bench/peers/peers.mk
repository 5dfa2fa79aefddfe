# bench/peers/peers.mk - build rules for the peer benchmarks (goro is
# compared against these in the same run). Included by the top-level
# Makefile, which defines BUILD (e.g. build) and CC/CXX.
#
# Provides PEER_BINS: every peer binary, under $(BUILD)/bench/peers/.
# All rules create their output directory themselves (make -j safe).

PEER_SRC := bench/peers
PEER_OUT := $(BUILD)/bench/peers

PEER_CFLAGS   ?= -O2 -Wall -Wextra
PEER_CXXFLAGS ?= -O2 -std=c++17 -Wall -Wextra
PEER_GO       ?= go
PEER_GOENV    := GO111MODULE=off GOCACHE=$(abspath $(BUILD))/gocache

PEER_C_BINS  := $(PEER_OUT)/switch_ucontext $(PEER_OUT)/spawn_pthread \
                $(PEER_OUT)/echo_epoll $(PEER_OUT)/echo_libevent
PEER_CC_BINS := $(PEER_OUT)/switch_boost
PEER_GO_NAMES := skynet pingpong yield spawn forkjoin parked sleep echo preempt timers pipeline group \
                 accept echo_tls httpd deadline file_pread
PEER_GO_BINS := $(addprefix $(PEER_OUT)/go/,$(PEER_GO_NAMES))

PEER_BINS := $(PEER_C_BINS) $(PEER_CC_BINS) $(PEER_GO_BINS)

$(PEER_OUT)/switch_ucontext: $(PEER_SRC)/switch_ucontext.c
	@mkdir -p $(@D)
	$(CC) $(PEER_CFLAGS) -o $@ $<

$(PEER_OUT)/spawn_pthread: $(PEER_SRC)/spawn_pthread.c
	@mkdir -p $(@D)
	$(CC) $(PEER_CFLAGS) -pthread -o $@ $<

$(PEER_OUT)/echo_epoll: $(PEER_SRC)/echo_epoll.c
	@mkdir -p $(@D)
	$(CC) $(PEER_CFLAGS) -pthread -o $@ $<

$(PEER_OUT)/echo_libevent: $(PEER_SRC)/echo_libevent.c
	@mkdir -p $(@D)
	$(CC) $(PEER_CFLAGS) -o $@ $< -levent_core

$(PEER_OUT)/switch_boost: $(PEER_SRC)/switch_boost.cc
	@mkdir -p $(@D)
	$(CXX) $(PEER_CXXFLAGS) -o $@ $< -lboost_context

$(PEER_OUT)/go/%: $(PEER_SRC)/go/%.go
	@mkdir -p $(@D) $(abspath $(BUILD))/gocache
	$(PEER_GOENV) $(PEER_GO) build -o $@ $<

.PHONY: peers
peers: $(PEER_BINS)
