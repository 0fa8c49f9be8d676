// Einstein summation (fluxion/ops/einsum.h): parsing and checking the
// subscripts, NumPy's greedy contraction path, and the contraction itself
// as pairwise matmuls over broadcast operands.
#include "fluxion/ops/einsum.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>

#include "fluxion/ops/array_ops.h"
#include "fluxion/ops/binary.h"
#include "fluxion/ops/common.h"
#include "fluxion/ops/creation.h"
#include "fluxion/ops/linalg.h"
#include "fluxion/ops/astype.h"
#include "fluxion/ops/ternary.h"
#include "fluxion/ops/reduce.h"
#include "fluxion/ops/shape.h"

namespace fluxion {

namespace {

struct EinsumSpec {
  std::vector<std::string> inputs;
  std::string output;
};

EinsumSpec parse_einsum(const std::string& subscripts,
                        const std::vector<array>& operands) {
  std::string sub;
  for (char c : subscripts) {
    if (c != ' ') {
      sub += c;
    }
  }
  EinsumSpec spec;
  auto arrow = sub.find("->");
  std::string lhs = arrow == std::string::npos ? sub : sub.substr(0, arrow);
  std::string cur;
  for (char c : lhs + ",") {
    if (c == ',') {
      spec.inputs.push_back(cur);
      cur.clear();
    } else if (std::isalpha(static_cast<unsigned char>(c))) {
      cur += c;
    } else {
      throw std::invalid_argument(
          "[einsum] Subscripts may only hold letters, ',' and '->'; got '" +
          std::string(1, c) + "' in '" + subscripts + "'.");
    }
  }
  if (spec.inputs.size() != operands.size()) {
    throw std::invalid_argument(
        "[einsum] '" + subscripts + "' names " +
        std::to_string(spec.inputs.size()) + " operands but " +
        std::to_string(operands.size()) + " were given.");
  }
  std::map<char, int> count, size;
  for (size_t i = 0; i < operands.size(); ++i) {
    const auto& term = spec.inputs[i];
    if (int(term.size()) != operands[i].ndim()) {
      throw std::invalid_argument(
          "[einsum] Operand " + std::to_string(i) + " has shape " +
          shape_str(operands[i].shape()) + " but its subscripts '" + term +
          "' name " + std::to_string(term.size()) + " axes.");
    }
    for (size_t d = 0; d < term.size(); ++d) {
      char c = term[d];
      ++count[c];
      auto it = size.find(c);
      int n = operands[i].shape(d);
      // Size 1 broadcasts against any size (NumPy).
      if (it != size.end() && it->second != n && it->second != 1 && n != 1) {
        throw std::invalid_argument(
            "[einsum] Index '" + std::string(1, c) + "' has size " +
            std::to_string(it->second) + " and size " +
            std::to_string(operands[i].shape(d)) + " (operand " +
            std::to_string(i) + ", shape " + shape_str(operands[i].shape()) +
            ").");
      }
      size[c] = it == size.end() ? n : std::max(it->second, n);
    }
  }
  if (arrow == std::string::npos) {
    for (auto [c, n] : count) {
      if (n == 1) {
        spec.output += c;
      }
    }
    // std::map orders uppercase before lowercase, as NumPy does.
  } else {
    std::string out = sub.substr(arrow + 2);
    for (size_t k = 0; k < out.size(); ++k) {
      char c = out[k];
      if (!std::isalpha(static_cast<unsigned char>(c))) {
        throw std::invalid_argument(
            "[einsum] Output subscripts may only hold letters; got '" + out +
            "'.");
      }
      if (!count.count(c)) {
        throw std::invalid_argument(
            "[einsum] Output index '" + std::string(1, c) +
            "' appears in no operand of '" + subscripts + "'.");
      }
      if (out.find(c) != k) {
        throw std::invalid_argument("[einsum] Output index '" +
                                    std::string(1, c) + "' repeats in '" +
                                    subscripts + "'.");
      }
    }
    spec.output = out;
  }
  return spec;
}

struct Term {
  array x;
  std::string idx;
};

// Takes diagonals for repeated letters, then sums the letters that `keep`
// does not contain.
Term reduce_term(Term t, const std::string& keep, StreamOrDevice s) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < t.idx.size() && !again; ++i) {
      auto j = t.idx.find(t.idx[i], i + 1);
      if (j != std::string::npos) {
        char c = t.idx[i];
        t.x = diagonal(t.x, 0, i, j, s);
        t.idx.erase(j, 1);
        t.idx.erase(i, 1);
        t.idx += c;
        again = true;
      }
    }
  }
  std::vector<int> axes;
  std::string kept;
  for (size_t i = 0; i < t.idx.size(); ++i) {
    if (keep.find(t.idx[i]) == std::string::npos) {
      axes.push_back(i);
    } else {
      kept += t.idx[i];
    }
  }
  if (!axes.empty()) {
    t.x = sum(t.x, axes, false, s);
    t.idx = kept;
  }
  return t;
}

// Letters of `terms` other than `skip1`/`skip2`, plus the output's.
std::string needed(const std::vector<std::string>& terms, size_t skip1,
                   size_t skip2, const std::string& output) {
  std::string out = output;
  for (size_t k = 0; k < terms.size(); ++k) {
    if (k != skip1 && k != skip2) {
      out += terms[k];
    }
  }
  return out;
}

// NumPy's einsum_path (optimize="greedy", memory limit the largest input
// or output): pairs that share an index, ranked by (-(elements removed),
// flop count), skipping pairs past the memory limit or costlier in total
// than the naive contraction; outer products only when nothing else is
// left. One or two operands, or no index to sum, give one step over all
// operands. Steps name positions in the current list; each result goes
// last.
using CharSet = std::set<char>;

int64_t set_size(const CharSet& s, const std::map<char, int>& size) {
  int64_t n = 1;
  for (char c : s) {
    n *= size.at(c);
  }
  return n;
}

int64_t flop_count(const CharSet& contract, bool inner, int num_terms,
                   const std::map<char, int>& size) {
  int64_t factor = std::max(1, num_terms - 1) + (inner ? 1 : 0);
  return set_size(contract, size) * factor;
}

struct Contraction {
  CharSet result, removed, contract;
  std::vector<CharSet> remaining;  // the other sets, then the result
};

Contraction find_contraction(const std::vector<int>& positions,
                             const std::vector<CharSet>& sets,
                             const CharSet& output) {
  Contraction c;
  CharSet remain = output;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (std::find(positions.begin(), positions.end(), int(i)) !=
        positions.end()) {
      c.contract.insert(sets[i].begin(), sets[i].end());
    } else {
      c.remaining.push_back(sets[i]);
      remain.insert(sets[i].begin(), sets[i].end());
    }
  }
  for (char ch : c.contract) {
    (remain.count(ch) ? c.result : c.removed).insert(ch);
  }
  c.remaining.push_back(c.result);
  return c;
}

struct Candidate {
  std::pair<int64_t, int64_t> sort;  // (-removed size, cost)
  std::pair<int, int> pos;
  std::vector<CharSet> sets;
};

std::optional<Candidate> possible_contraction(
    std::pair<int, int> pos, const std::vector<CharSet>& sets,
    const CharSet& output, const std::map<char, int>& size,
    int64_t memory_limit, int64_t path_cost, int64_t naive_cost) {
  auto c = find_contraction({pos.first, pos.second}, sets, output);
  int64_t new_size = set_size(c.result, size);
  if (new_size > memory_limit) {
    return std::nullopt;
  }
  int64_t removed = set_size(sets[pos.first], size) +
                    set_size(sets[pos.second], size) - new_size;
  int64_t cost = flop_count(c.contract, !c.removed.empty(), 2, size);
  if (path_cost + cost > naive_cost) {
    return std::nullopt;
  }
  return Candidate{{-removed, cost}, pos, std::move(c.remaining)};
}

std::vector<std::vector<int>> numpy_path(const std::vector<std::string>& terms,
                                         const std::string& output,
                                         const std::map<char, int>& size) {
  int n = static_cast<int>(terms.size());
  std::vector<CharSet> sets;
  CharSet indices, out(output.begin(), output.end());
  size_t total_len = 0;
  int64_t max_size = set_size(out, size);
  for (auto& t : terms) {
    sets.emplace_back(t.begin(), t.end());
    total_len += sets.back().size();
    indices.insert(t.begin(), t.end());
    max_size = std::max(max_size, set_size(sets.back(), size));
  }
  std::vector<int> all(n);
  std::iota(all.begin(), all.end(), 0);
  if (n <= 2 || indices == out) {
    return {all};
  }
  bool inner = total_len > indices.size();
  int64_t naive_cost = flop_count(indices, inner, n, size);
  std::vector<std::vector<int>> path;
  std::vector<Candidate> known;
  std::vector<std::pair<int, int>> pairs;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      pairs.push_back({i, j});
    }
  }
  int64_t path_cost = 0;
  for (int it = 0; it < n - 1; ++it) {
    for (auto pos : pairs) {
      const CharSet &a = sets[pos.first], &b = sets[pos.second];
      bool shares = std::any_of(a.begin(), a.end(),
                                [&](char c) { return b.count(c) > 0; });
      if (!shares) {
        continue;  // outer products only as a last resort
      }
      if (auto r = possible_contraction(pos, sets, out, size, max_size,
                                        path_cost, naive_cost)) {
        known.push_back(std::move(*r));
      }
    }
    if (known.empty()) {
      for (int i = 0; i < static_cast<int>(sets.size()); ++i) {
        for (int j = i + 1; j < static_cast<int>(sets.size()); ++j) {
          if (auto r = possible_contraction({i, j}, sets, out, size, max_size,
                                            path_cost, naive_cost)) {
            known.push_back(std::move(*r));
          }
        }
      }
      if (known.empty()) {
        std::vector<int> rest(sets.size());
        std::iota(rest.begin(), rest.end(), 0);
        path.push_back(rest);
        break;
      }
    }
    size_t bi = 0;
    for (size_t k = 1; k < known.size(); ++k) {
      if (known[k].sort < known[bi].sort) {
        bi = k;
      }
    }
    Candidate best = known[bi];
    // Keep the other candidates, renumbered for the list after `best`.
    auto [bx, by] = best.pos;
    std::vector<Candidate> next;
    for (auto& c : known) {
      auto [x, y] = c.pos;
      if (x == bx || x == by || y == bx || y == by) {
        continue;
      }
      auto sets_c = c.sets;
      sets_c.erase(sets_c.begin() + (by - int(by > x) - int(by > y)));
      sets_c.erase(sets_c.begin() + (bx - int(bx > x) - int(bx > y)));
      sets_c.insert(sets_c.end() - 1, best.sets.back());
      next.push_back({c.sort,
                      {x - int(x > bx) - int(x > by),
                       y - int(y > bx) - int(y > by)},
                      std::move(sets_c)});
    }
    known = std::move(next);
    sets = best.sets;
    int last = static_cast<int>(sets.size()) - 1;
    pairs.clear();
    for (int i = 0; i < last; ++i) {
      pairs.push_back({i, last});
    }
    path.push_back({bx, by});
    path_cost += best.sort.second;
  }
  return path;
}

std::map<char, int> index_sizes(const EinsumSpec& spec,
                                const std::vector<array>& operands) {
  std::map<char, int> size;
  for (size_t i = 0; i < operands.size(); ++i) {
    for (size_t d = 0; d < spec.inputs[i].size(); ++d) {
      int& n = size[spec.inputs[i][d]];  // size-1 axes broadcast
      n = std::max(n, operands[i].shape(d));
    }
  }
  return size;
}

// Operands with a size-1 axis whose letter is larger elsewhere, broadcast.
std::vector<array> broadcast_einsum_operands(const EinsumSpec& spec,
                                             std::vector<array> ops,
                                             StreamOrDevice s) {
  auto size = index_sizes(spec, ops);
  for (size_t i = 0; i < ops.size(); ++i) {
    Shape target;
    for (char c : spec.inputs[i]) {
      target.push_back(size[c]);
    }
    if (target != ops[i].shape()) {
      ops[i] = broadcast_to(ops[i], target, s);
    }
  }
  return ops;
}

// Contracts two terms with no private letters: batch letters (in both,
// kept), contracted letters (in both, not kept), and each side's own.
Term contract(const Term& a, const Term& b, const std::string& keep,
              StreamOrDevice s) {
  std::string batch, con, left, right;
  for (char c : a.idx) {
    bool in_b = b.idx.find(c) != std::string::npos;
    bool kept = keep.find(c) != std::string::npos;
    (in_b ? (kept ? batch : con) : left) += c;
  }
  for (char c : b.idx) {
    if (a.idx.find(c) == std::string::npos) {
      right += c;
    }
  }
  auto dims = [](const Term& t, const std::string& letters, Shape& shape) {
    int64_t n = 1;
    for (char c : letters) {
      int d = t.x.shape(t.idx.find(c));
      shape.push_back(d);
      n *= d;
    }
    return int(n);
  };
  auto perm = [](const Term& t, const std::string& order) {
    std::vector<int> p;
    for (char c : order) {
      p.push_back(t.idx.find(c));
    }
    return p;
  };
  Shape out_shape, ignore;
  int nb = dims(a, batch, out_shape);
  int nl = dims(a, left, out_shape);
  int nr = dims(b, right, out_shape);
  int nc = dims(a, con, ignore);
  auto x =
      reshape(transpose(a.x, perm(a, batch + left + con), s), {nb, nl, nc}, s);
  auto y =
      reshape(transpose(b.x, perm(b, batch + con + right), s), {nb, nc, nr}, s);
  array r = is_inexact(promote_types(x.dtype(), y.dtype()))
                ? matmul(x, y, s)
                // matmul is for inexact types: integers multiply and sum.
                : sum(multiply(reshape(x, {nb, nl, nc, 1}, s),
                               reshape(y, {nb, 1, nc, nr}, s), s),
                      2, false, s);
  return {reshape(r, out_shape, s), batch + left + right};
}

// Rewrites "..." as fresh letters: each operand's ellipsis axes are
// broadcast (right-aligned, as NumPy does) to one common shape, and an
// implicit output lists them first.
std::pair<std::string, std::vector<array>> expand_ellipsis(
    const std::string& subscripts, std::vector<array> operands,
    StreamOrDevice s) {
  std::string sub;
  for (char c : subscripts) {
    if (c != ' ') {
      sub += c;
    }
  }
  if (sub.find("...") == std::string::npos) {
    return {subscripts, operands};
  }
  auto arrow = sub.find("->");
  std::string lhs = arrow == std::string::npos ? sub : sub.substr(0, arrow);
  std::vector<std::string> terms;
  std::string cur;
  for (char c : lhs + ",") {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (terms.size() != operands.size()) {
    return {subscripts, operands};  // parse_einsum reports the mismatch
  }
  Shape batch;
  std::vector<int> rank(terms.size(), -1);
  for (size_t i = 0; i < terms.size(); ++i) {
    auto pos = terms[i].find("...");
    if (pos == std::string::npos) {
      continue;
    }
    int letters = terms[i].size() - 3;
    rank[i] = operands[i].ndim() - letters;
    if (rank[i] < 0) {
      throw std::invalid_argument(
          "[einsum] Operand " + std::to_string(i) + " has shape " +
          shape_str(operands[i].shape()) + " but its subscripts '" + terms[i] +
          "' name " + std::to_string(letters) + " axes.");
    }
    Shape part(operands[i].shape().begin() + pos,
               operands[i].shape().begin() + pos + rank[i]);
    batch = broadcast_shapes(batch, part, "einsum");
  }
  std::string fresh;
  for (char c = 'A'; c <= 'z' && fresh.size() < batch.size(); ++c) {
    if (std::isalpha(static_cast<unsigned char>(c)) &&
        sub.find(c) == std::string::npos) {
      fresh += c;
    }
  }
  if (fresh.size() < batch.size()) {
    throw std::invalid_argument("[einsum] Too many axes under '...' in '" +
                                subscripts + "' for the free letters.");
  }
  std::string new_lhs;
  for (size_t i = 0; i < terms.size(); ++i) {
    if (rank[i] >= 0) {
      auto pos = terms[i].find("...");
      const auto& sh = operands[i].shape();
      Shape target(sh.begin(), sh.begin() + pos), padded = target;
      padded.insert(padded.end(), batch.size() - rank[i], 1);
      padded.insert(padded.end(), sh.begin() + pos, sh.end());
      target.insert(target.end(), batch.begin(), batch.end());
      target.insert(target.end(), sh.begin() + pos + rank[i], sh.end());
      operands[i] = broadcast_to(reshape(operands[i], padded, s), target, s);
      terms[i].replace(pos, 3, fresh);
    }
    new_lhs += (i ? "," : "") + terms[i];
  }
  std::string out;
  if (arrow != std::string::npos) {
    out = sub.substr(arrow + 2);
    auto pos = out.find("...");
    if (pos != std::string::npos) {
      out.replace(pos, 3, fresh);
    } else if (!batch.empty()) {
      // As NumPy: broadcast axes are not summed away silently.
      throw std::invalid_argument(
          "[einsum] The output of '" + subscripts + "' has no '...' for the " +
          std::to_string(batch.size()) + " axes under '...' " +
          shape_str(batch) + ".");
    }
  } else {
    std::map<char, int> count;
    for (char c : new_lhs) {
      count[c] += c != ',';
    }
    out = fresh;
    for (auto [c, n] : count) {
      if (n == 1 && fresh.find(c) == std::string::npos) {
        out += c;
      }
    }
  }
  return {new_lhs + "->" + out, operands};
}

}  // namespace

std::pair<std::vector<std::vector<int>>, std::string> einsum_path(
    const std::string& subscripts, const std::vector<array>& operands) {
  auto [expanded, ops] = expand_ellipsis(subscripts, operands, {});
  auto spec = parse_einsum(expanded, ops);
  auto size = index_sizes(spec, ops);
  // Paths are planned on the terms after diagonals and private sums.
  std::vector<std::string> terms;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    std::string t;
    auto keep = needed(spec.inputs, i, i, spec.output);
    for (char c : spec.inputs[i]) {
      if (keep.find(c) != std::string::npos && t.find(c) == std::string::npos) {
        t += c;
      }
    }
    terms.push_back(t);
  }
  // The path is planned on the subscripts as given (NumPy's); the
  // description follows it on the reduced terms.
  auto path = numpy_path(spec.inputs, spec.output, size);
  std::ostringstream os;
  os << "Complete contraction: " << subscripts << "\n";
  for (const auto& p : path) {
    std::vector<size_t> pos(p.begin(), p.end());
    std::string merged, joined;
    std::string keep = spec.output;
    for (size_t k = 0; k < terms.size(); ++k) {
      if (std::find(pos.begin(), pos.end(), k) == pos.end()) {
        keep += terms[k];
      }
    }
    for (size_t i = 0; i < pos.size(); ++i) {
      joined += (i ? "," : "") + terms[pos[i]];
      for (char c : terms[pos[i]]) {
        if (keep.find(c) != std::string::npos &&
            merged.find(c) == std::string::npos) {
          merged += c;
        }
      }
    }
    int64_t elems = 1;
    for (char c : merged) {
      elems *= size.at(c);
    }
    os << "(";
    for (size_t i = 0; i < pos.size(); ++i) {
      os << (i ? ", " : "") << pos[i];
    }
    os << "): " << joined << "->" << merged << " (" << elems
       << " elements)\n";
    std::vector<size_t> desc = pos;
    std::sort(desc.rbegin(), desc.rend());
    for (size_t k : desc) {
      terms.erase(terms.begin() + k);
    }
    terms.push_back(merged);
  }
  return {path, os.str()};
}

array einsum(const std::string& subscripts, const std::vector<array>& operands,
             StreamOrDevice s) {
  if (operands.empty()) {
    throw std::invalid_argument("[einsum] At least one operand is needed.");
  }
  auto [expanded, ops] = expand_ellipsis(subscripts, operands, s);
  auto spec = parse_einsum(expanded, ops);
  ops = broadcast_einsum_operands(spec, std::move(ops), s);
  auto size = index_sizes(spec, ops);
  std::vector<Term> terms;
  for (size_t i = 0; i < operands.size(); ++i) {
    terms.push_back(reduce_term({ops[i], spec.inputs[i]},
                                needed(spec.inputs, i, i, spec.output), s));
  }
  // NumPy's path (what einsum_path reports); a step over several terms
  // contracts them pairwise, left to right.
  for (const auto& step : numpy_path(spec.inputs, spec.output, size)) {
    if (step.size() < 2) {
      continue;
    }
    std::vector<int> pos(step.begin(), step.end());
    while (pos.size() > 1) {
      int p0 = pos[0], p1 = pos[1];
      std::vector<std::string> cur;
      for (const auto& t : terms) {
        cur.push_back(t.idx);
      }
      auto keep = needed(cur, p0, p1, spec.output);
      if (pos.size() > 2) {
        // Letters of the terms still to join in this step stay too.
        for (size_t k = 2; k < pos.size(); ++k) {
          keep += cur[pos[k]];
        }
      }
      auto merged = contract(terms[p0], terms[p1], keep, s);
      int lo = std::min(p0, p1), hi = std::max(p0, p1);
      terms.erase(terms.begin() + hi);
      terms.erase(terms.begin() + lo);
      terms.push_back(merged);
      // Positions of the rest of this step after removing p0 and p1; the
      // merged term is last.
      std::vector<int> rest;
      for (size_t k = 2; k < pos.size(); ++k) {
        rest.push_back(pos[k] - int(pos[k] > lo) - int(pos[k] > hi));
      }
      rest.push_back(static_cast<int>(terms.size()) - 1);
      pos = rest;
    }
  }
  auto last = reduce_term(terms[0], spec.output, s);
  std::vector<int> perm;
  for (char c : spec.output) {
    perm.push_back(last.idx.find(c));
  }
  return transpose(last.x, perm, s);
}

}  // namespace fluxion
