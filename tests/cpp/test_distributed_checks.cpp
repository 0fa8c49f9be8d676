// mx.distributed's pieces that need no second process or GPU: the TCP
// rendezvous of torchrun-style launches (ranks as threads of this process)
// and its timeouts, and the cross-rank check's descriptors and messages.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "fluxion/distributed_comm.h"
#include "test_utils.h"

using namespace fluxion;
using fluxion::test::expect_error;
namespace dd = fluxion::distributed::detail;

namespace {
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}
}  // namespace

TEST(DistributedRendezvous, EveryRankGetsRankZerosBytes) {
  int port = free_port();
  std::string blob(128, '\0');
  for (int i = 0; i < 128; ++i) {
    blob[i] = static_cast<char>(i * 7);
  }
  const int n = 4;
  std::vector<std::string> got(n);
  std::vector<std::string> errors(n);
  std::vector<std::thread> ranks;
  // Ranks 1.. start first: they retry until rank 0 listens.
  for (int r = n - 1; r >= 0; --r) {
    ranks.emplace_back([&, r] {
      try {
        got[r] = dd::tcp_broadcast("distributed.init", "127.0.0.1", port, r,
                                   n, r == 0 ? blob : "", 128, 20);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
    if (r == n - 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  for (auto& t : ranks) {
    t.join();
  }
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(errors[r], "") << r;
    EXPECT_EQ(got[r], blob) << r;
  }
}

TEST(DistributedRendezvous, TimesOutNamingTheMissingRanks) {
  int port = free_port();
  expect_error<std::runtime_error>(
      [&] {
        dd::tcp_broadcast("distributed.init", "127.0.0.1", port, 0, 3,
                          std::string(8, 'x'), 8, 0.3);
      },
      "[distributed.init] Timed out after 0.300000 s (FLUXION_DIST_TIMEOUT) "
      "in the rendezvous at 127.0.0.1:" +
          std::to_string(port) + " (rank 0 of 3): rank(s) 1, 2 did not connect.");
  expect_error<std::runtime_error>(
      [&] {
        dd::tcp_broadcast("distributed.init", "127.0.0.1", port, 2, 3, "", 8,
                          0.3);
      },
      "(rank 2 of 3): rank 0 did not answer");
  expect_error<std::invalid_argument>(
      [&] {
        dd::tcp_broadcast("distributed.init", "127.0.0.1", 70000, 0, 2, "", 8,
                          1);
      },
      "[distributed.init] Invalid port 70000.");
  expect_error<std::invalid_argument>(
      [&] {
        dd::tcp_broadcast("distributed.init", "127.0.0.1", port, 2, 2, "", 8,
                          1);
      },
      "Invalid rank 2 for a world of 2");
}

TEST(DistributedChecks, DescriptorsNameTheRanksThatDiffer) {
  auto a = dd::describe("all_sum", zeros({4}, float32));
  auto b = dd::describe("all_sum", zeros({2, 3}, int32));
  auto c = dd::describe("all_gather", zeros({4}, float32));
  dd::check_descriptors("all_sum", {a, a, a}, 1);
  expect_error<std::invalid_argument>(
      [&] { dd::check_descriptors("all_sum", {a, b, a, c}, 2); },
      "[all_sum] Mismatched arguments across the ranks of a group of 4 (seen "
      "on rank 2): rank 0 called all_sum with float32 of shape (4,); rank 1 "
      "called all_sum with int32 of shape (2, 3); rank 3 called all_gather "
      "with float32 of shape (4,).");
  // Many dims: the size is given instead of the shape.
  auto d9 = dd::describe("all_sum", zeros({1, 1, 1, 1, 1, 1, 1, 2, 3}, float32));
  auto e9 = dd::describe("all_sum", zeros({1, 1, 1, 1, 1, 1, 1, 3, 2}, float32));
  EXPECT_NE(d9, e9);
  expect_error<std::invalid_argument>(
      [&] { dd::check_descriptors("all_sum", {d9, e9}, 0); },
      "float32 of shape (9 dims, 6 elements)");
  // A transfer compares all but the op (send against recv).
  dd::check_transfer("recv", dd::describe("send", zeros({4}, float32)),
                     dd::describe("recv", zeros({4}, float32)), 0, 1);
  expect_error<std::invalid_argument>(
      [&] {
        dd::check_transfer("recv", dd::describe("send", zeros({4}, float32)),
                           dd::describe("recv", zeros({4}, float16)), 0, 1);
      },
      "[recv] Mismatched transfer: rank 1 expected float16 of shape (4,) from "
      "rank 0, which sent float32 of shape (4,).");
}

TEST(DistributedChecks, CheckEnabledReadsTheEnvironment) {
  unsetenv("FLUXION_DIST_CHECK");
  EXPECT_TRUE(dd::check_enabled(true));
  EXPECT_FALSE(dd::check_enabled(false));
  setenv("FLUXION_DIST_CHECK", "0", 1);
  EXPECT_FALSE(dd::check_enabled(true));
  setenv("FLUXION_DIST_CHECK", "1", 1);
  EXPECT_TRUE(dd::check_enabled(false));
  setenv("FLUXION_DIST_CHECK", "yes", 1);
  expect_error<std::invalid_argument>([] { dd::check_enabled(true); },
                                      "FLUXION_DIST_CHECK must be 0 or 1");
  unsetenv("FLUXION_DIST_CHECK");
}
