// A minimal XML parser for the tests: elements, double- or single-quoted attributes, text with
// the five predefined entities and numeric references, comments. Anything else — an unquoted or
// repeated attribute, a bare '&' or '<', a tag closed by another name, text after the root — is
// an error naming the offset. Enough to tell that an SVG chart is well-formed XML.
#pragma once

#include <cctype>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace meshtrain::testing {

struct XmlNode {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::vector<XmlNode> children;
  std::string text;  // the text directly inside, entities resolved

  // Every element below this one (itself included) named `tag`, in document order.
  void find_all(const std::string& tag, std::vector<const XmlNode*>& out) const {
    if (name == tag) out.push_back(this);
    for (const XmlNode& child : children) child.find_all(tag, out);
  }
  // The `tag` elements at or under this one whose class is `css_class`, in document order.
  std::vector<const XmlNode*> find_with_class(const std::string& tag,
                                              const std::string& css_class) const {
    std::vector<const XmlNode*> all, matching;
    find_all(tag, all);
    for (const XmlNode* n : all)
      if (n->attributes.count("class") && n->attributes.at("class") == css_class)
        matching.push_back(n);
    return matching;
  }
};

class MiniXml {
 public:
  // The root element of `text`; std::runtime_error when `text` is not well-formed.
  static XmlNode parse(const std::string& text) {
    MiniXml p(text);
    p.skip_space_and_comments();
    XmlNode root = p.element();
    p.skip_space_and_comments();
    if (p.at_ != text.size()) p.fail("text after the root element");
    return root;
  }

 private:
  explicit MiniXml(const std::string& text) : s_(text) {}

  [[noreturn]] void fail(const std::string& what) const {
    throw std::runtime_error("XML: " + what + " at offset " + std::to_string(at_) + ": '" +
                             s_.substr(at_, 40) + "'");
  }
  bool starts(const char* prefix) const {
    return s_.compare(at_, std::strlen(prefix), prefix) == 0;
  }
  void skip_space() {
    while (at_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[at_]))) ++at_;
  }
  void skip_space_and_comments() {
    for (skip_space(); starts("<!--"); skip_space()) {
      const size_t end = s_.find("-->", at_);
      if (end == std::string::npos) fail("unclosed comment");
      at_ = end + 3;
    }
  }
  std::string name() {
    const size_t from = at_;
    while (at_ < s_.size() &&
           (std::isalnum(static_cast<unsigned char>(s_[at_])) || s_[at_] == '-' || s_[at_] == '_' ||
            s_[at_] == ':' || s_[at_] == '.'))
      ++at_;
    if (at_ == from || std::isdigit(static_cast<unsigned char>(s_[from]))) fail("expected a name");
    return s_.substr(from, at_ - from);
  }
  // Text up to `end` (a quote, or '<'), with references resolved; '<' inside an attribute and a
  // bare '&' anywhere are errors.
  std::string characters(char end) {
    std::string out;
    while (at_ < s_.size() && s_[at_] != end) {
      const char c = s_[at_];
      if (c == '<') fail("'<' in an attribute value");
      if (c != '&') {
        out += c;
        ++at_;
        continue;
      }
      const size_t semi = s_.find(';', at_);
      if (semi == std::string::npos || semi - at_ > 10) fail("a bare '&'");
      const std::string ref = s_.substr(at_ + 1, semi - at_ - 1);
      static const std::map<std::string, std::string> named = {
          {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
      if (const auto it = named.find(ref); it != named.end()) {
        out += it->second;
      } else if (ref.size() > 1 && ref[0] == '#') {
        for (size_t i = 1; i < ref.size(); ++i)
          if (!std::isdigit(static_cast<unsigned char>(ref[i]))) fail("a bad character reference");
        out += '?';
      } else {
        fail("an unknown entity &" + ref + ";");
      }
      at_ = semi + 1;
    }
    return out;
  }
  XmlNode element() {
    if (!starts("<")) fail("expected '<'");
    ++at_;
    XmlNode node;
    node.name = name();
    for (;;) {
      const size_t before = at_;
      skip_space();
      if (starts("/>")) {
        at_ += 2;
        return node;
      }
      if (starts(">")) {
        ++at_;
        break;
      }
      if (at_ == before) fail("expected a space before an attribute");
      const std::string key = name();
      skip_space();
      if (!starts("=")) fail("expected '=' after attribute " + key);
      ++at_;
      skip_space();
      if (at_ >= s_.size() || (s_[at_] != '"' && s_[at_] != '\'')) fail("an unquoted attribute");
      const char quote = s_[at_++];
      std::string value = characters(quote);
      if (at_ >= s_.size()) fail("an unclosed attribute value");
      ++at_;
      if (!node.attributes.emplace(key, value).second) fail("attribute " + key + " repeated");
    }
    for (;;) {
      node.text += characters('<');
      if (at_ >= s_.size()) fail("element <" + node.name + "> not closed");
      if (starts("<!--")) {
        skip_space_and_comments();
      } else if (starts("</")) {
        at_ += 2;
        if (name() != node.name) fail("closing tag does not match <" + node.name + ">");
        skip_space();
        if (!starts(">")) fail("expected '>'");
        ++at_;
        return node;
      } else {
        node.children.push_back(element());
      }
    }
  }

  const std::string& s_;
  size_t at_ = 0;
};

}  // namespace meshtrain::testing
