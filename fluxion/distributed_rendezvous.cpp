// The TCP rendezvous of a launcher that gives ranks through environment
// variables (torchrun's RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT): rank 0
// listens, every other rank connects and receives rank 0's bytes (NCCL's
// unique id). Plain POSIX sockets, bounded in time: a rank that never comes
// makes the others raise, naming the ranks missing, instead of waiting
// forever.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "fluxion/distributed_comm.h"

namespace fluxion::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd >= 0) {
      ::close(fd);
    }
  }
};

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - Clock::now())
                  .count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Reads or writes exactly n bytes before the deadline; false on a closed
// socket, an error or the deadline.
bool exchange(int fd, char* p, size_t n, bool write,
              Clock::time_point deadline) {
  while (n > 0) {
    pollfd pfd{fd, static_cast<short>(write ? POLLOUT : POLLIN), 0};
    int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      return false;
    }
    ssize_t k = write ? ::send(fd, p, n, MSG_NOSIGNAL) : ::recv(fd, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) {
      continue;
    }
    if (k <= 0) {
      return false;
    }
    p += k;
    n -= static_cast<size_t>(k);
  }
  return true;
}

std::string where(const std::string& host, int port, int rank, int size) {
  return host + ":" + std::to_string(port) + " (rank " + std::to_string(rank) +
         " of " + std::to_string(size) + ")";
}

std::string serve(const char* op, const std::string& host, int port, int size,
                  const std::string& blob, Clock::time_point deadline,
                  double timeout_s) {
  Fd s(::socket(AF_INET6, SOCK_STREAM, 0));
  bool v6 = s.fd >= 0;
  if (!v6) {
    s.fd = ::socket(AF_INET, SOCK_STREAM, 0);
  }
  if (s.fd < 0) {
    throw std::runtime_error(std::string("[") + op + "] socket() failed: " +
                             std::strerror(errno));
  }
  int one = 1, zero = 0;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  // Every address of this host (MASTER_ADDR names one of them, for the
  // other ranks), IPv4 included on an IPv6 socket.
  if (v6) {
    ::setsockopt(s.fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    rc = ::bind(s.fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  }
  if (rc != 0 || ::listen(s.fd, size) != 0) {
    throw std::runtime_error(
        std::string("[") + op + "] Rank 0 cannot listen on port " +
        std::to_string(port) + ": " + std::strerror(errno) +
        (errno == EADDRINUSE
             ? " (under torchrun its own store holds MASTER_PORT: give "
               "Fluxion another with FLUXION_DIST_PORT)"
             : "") +
        ".");
  }
  std::set<int> joined;
  while (static_cast<int>(joined.size()) < size - 1) {
    pollfd pfd{s.fd, POLLIN, 0};
    int r = ::poll(&pfd, 1, ms_left(deadline));
    if (r < 0 && errno == EINTR) {
      continue;
    }
    if (r <= 0) {
      std::string missing;
      for (int q = 1; q < size; ++q) {
        if (!joined.count(q)) {
          missing += (missing.empty() ? "" : ", ") + std::to_string(q);
        }
      }
      throw std::runtime_error(
          std::string("[") + op + "] Timed out after " +
          std::to_string(timeout_s) + " s (FLUXION_DIST_TIMEOUT) in the "
          "rendezvous at " + where(host, port, 0, size) + ": rank(s) " +
          missing + " did not connect.");
    }
    Fd c(::accept(s.fd, nullptr, nullptr));
    if (c.fd < 0) {
      continue;
    }
    uint32_t peer = 0;
    if (!exchange(c.fd, reinterpret_cast<char*>(&peer), sizeof peer, false,
                  deadline)) {
      continue;  // not one of ours, or it went away: wait for the others
    }
    int q = static_cast<int>(ntohl(peer));
    if (q <= 0 || q >= size) {
      continue;
    }
    std::string reply = blob;
    if (exchange(c.fd, reply.data(), reply.size(), true, deadline)) {
      joined.insert(q);
    }
  }
  return blob;
}

std::string join(const char* op, const std::string& host, int port, int rank,
                 int size, size_t bytes, Clock::time_point deadline,
                 double timeout_s) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last = "no answer";
  // Rank 0 may not listen yet: retry until the deadline.
  while (true) {
    addrinfo* res = nullptr;
    int g = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                          &res);
    if (g != 0) {
      throw std::runtime_error(std::string("[") + op +
                               "] Cannot resolve MASTER_ADDR '" + host +
                               "': " + ::gai_strerror(g) + ".");
    }
    for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
      Fd c(::socket(a->ai_family, a->ai_socktype, a->ai_protocol));
      if (c.fd < 0) {
        continue;
      }
      if (::connect(c.fd, a->ai_addr, a->ai_addrlen) != 0) {
        last = std::strerror(errno);
        continue;
      }
      uint32_t me = htonl(static_cast<uint32_t>(rank));
      std::string blob(bytes, '\0');
      if (exchange(c.fd, reinterpret_cast<char*>(&me), sizeof me, true,
                   deadline) &&
          exchange(c.fd, blob.data(), bytes, false, deadline)) {
        ::freeaddrinfo(res);
        return blob;
      }
      last = "the connection closed early";
    }
    ::freeaddrinfo(res);
    if (ms_left(deadline) == 0) {
      throw std::runtime_error(
          std::string("[") + op + "] Timed out after " +
          std::to_string(timeout_s) + " s (FLUXION_DIST_TIMEOUT) in the "
          "rendezvous at " + where(host, port, rank, size) +
          ": rank 0 did not answer (" + last + ").");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

}  // namespace

std::string tcp_broadcast(const char* op, const std::string& host, int port,
                          int rank, int size, const std::string& blob,
                          size_t bytes, double timeout_s) {
  if (port <= 0 || port > 65535) {
    throw std::invalid_argument(std::string("[") + op + "] Invalid port " +
                                std::to_string(port) + ".");
  }
  if (rank < 0 || rank >= size) {
    throw std::invalid_argument(std::string("[") + op + "] Invalid rank " +
                                std::to_string(rank) + " for a world of " +
                                std::to_string(size) + ".");
  }
  auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(timeout_s));
  if (rank == 0) {
    if (blob.size() != bytes) {
      throw std::invalid_argument(std::string("[") + op +
                                  "] The rendezvous blob has the wrong size.");
    }
    return size == 1 ? blob
                     : serve(op, host, port, size, blob, deadline, timeout_s);
  }
  return join(op, host, port, rank, size, bytes, deadline, timeout_s);
}

}  // namespace fluxion::distributed::detail
