#include "tfmpi/probe/proc_parse.h"

#include <cstdlib>
#include <sstream>

namespace tfmpi::probe {

namespace {

std::string Trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

std::optional<long long> ToInteger(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const long long value = std::strtoll(s.c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return value;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(s);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!s.empty() && s.back() == sep) parts.emplace_back();
  return parts;
}

}  // namespace

std::optional<int> CountCpuList(const std::string& text) {
  const std::string list = Trim(text);
  if (list.empty()) return std::nullopt;
  int count = 0;
  for (const std::string& range : Split(list, ',')) {
    const auto dash = range.find('-');
    const auto first = ToInteger(range.substr(0, dash));
    const auto last = dash == std::string::npos ? first : ToInteger(range.substr(dash + 1));
    if (!first || !last || *last < *first || *first < 0) return std::nullopt;
    count += static_cast<int>(*last - *first + 1);
  }
  return count;
}

std::optional<double> ParseLoad1(const std::string& text) {
  std::istringstream in(text);
  double load = 0;
  if (!(in >> load) || load < 0) return std::nullopt;
  return load;
}

std::optional<MemInfo> ParseMemInfo(const std::string& text) {
  std::istringstream in(text);
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  std::optional<std::uint64_t> total, available, free, cached;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    if (!(fields >> key >> kib)) continue;
    if (key == "MemTotal:") total = kib * 1024;
    if (key == "MemAvailable:") available = kib * 1024;
    if (key == "MemFree:") free = kib * 1024;
    if (key == "Cached:") cached = kib * 1024;
  }
  if (!total) return std::nullopt;
  if (!available && free) available = *free + cached.value_or(0);
  if (!available) return std::nullopt;
  return MemInfo{*total, *available};
}

std::optional<CgroupPath> ParseSelfCgroup(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  std::optional<CgroupPath> v2;
  while (std::getline(in, line)) {
    const auto first = line.find(':');
    const auto second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    const std::string controllers = line.substr(first + 1, second - first - 1);
    const std::string path = line.substr(second + 1);
    if (line.compare(0, first, "0") == 0 && controllers.empty()) {
      v2 = CgroupPath{true, path};
      continue;
    }
    for (const std::string& c : Split(controllers, ',')) {
      if (c == "cpu") return CgroupPath{false, path};  // v1 cpu controller wins over v2
    }
  }
  return v2;
}

std::optional<CgroupMount> FindCgroupMount(const std::string& mountinfo, bool v2) {
  std::istringstream in(mountinfo);
  std::string line;
  while (std::getline(in, line)) {
    // id parent major:minor root mount-point options [optional...] - fstype source super-options
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, dev, root, mount_point;
    if (!(head >> id >> parent >> dev >> root >> mount_point)) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype, source, options;
    tail >> fstype >> source >> options;
    if (v2 && fstype == "cgroup2") return CgroupMount{root, mount_point};
    if (!v2 && fstype == "cgroup") {
      for (const std::string& o : Split(options, ',')) {
        if (o == "cpu") return CgroupMount{root, mount_point};
      }
    }
  }
  return std::nullopt;
}

std::vector<std::string> CgroupDirsUpward(const CgroupMount& mount, const std::string& cgroup_path) {
  std::string relative;
  if (mount.root == "/") {
    relative = cgroup_path;
  } else if (cgroup_path == mount.root || cgroup_path.rfind(mount.root + "/", 0) == 0) {
    relative = cgroup_path.substr(mount.root.size());
  } else {
    return {};
  }
  std::vector<std::string> dirs;
  while (!relative.empty() && relative != "/") {
    dirs.push_back(mount.mount_point + relative);
    relative = relative.substr(0, relative.rfind('/'));
  }
  dirs.push_back(mount.mount_point);
  return dirs;
}

std::optional<double> ParseCpuMax(const std::string& text) {
  std::istringstream in(text);
  std::string quota, period;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  const auto q = ToInteger(quota);
  const auto p = ToInteger(period);
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;
  return static_cast<double>(*q) / static_cast<double>(*p);
}

std::optional<double> ParseCfsQuota(const std::string& quota_us, const std::string& period_us) {
  const auto q = ToInteger(Trim(quota_us));
  const auto p = ToInteger(Trim(period_us));
  if (!q || !p || *q <= 0 || *p <= 0) return std::nullopt;  // -1: no limit
  return static_cast<double>(*q) / static_cast<double>(*p);
}

}  // namespace tfmpi::probe
