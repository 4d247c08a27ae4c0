#pragma once
// Internal to the graph text format (ir/text.h), shared by text_print.cpp and
// text_parse.cpp: the name rules, string escaping, hex/base64 and number helpers, and
// the ModelInfo header fields that both the printer and the parser know.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "ir/graph.h"

namespace isomer::text_detail {

// ---- Names and quoting -----------------------------------------------------------

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
inline bool is_name_char(char c) { return is_letter(c) || is_digit(c) || c == '_' || c == '.'; }
inline bool all_digits(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_digit); }

// `s` in double quotes, escaped so the lexer reads it back exactly (text_print.cpp).
std::string quote(std::string_view s);

// ---- Blobs: hex for tensor data, base64 for serialized protos -------------------

// Two lowercase hex digits per byte (text_print.cpp).
std::string to_hex(std::string_view bytes);

inline constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// ---- Numbers ----------------------------------------------------------------------

// Parses all of `s` as a T (leading '+' allowed).
template <class T>
bool parse_all(std::string_view s, T& v) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// ---- Tensor elements -------------------------------------------------------------

// Appends the little-endian bytes of one element written as `s`; false if `s` is not
// a value of type `dt`.
bool append_element(DType dt, std::string_view s, std::string& bytes);  // text_parse.cpp

// ---- Header lines -----------------------------------------------------------------

// Header lines for ModelInfo's scalar fields (the graph name is in the graph line).
inline constexpr std::pair<const char*, int64_t ModelInfo::*> kIntFields[] = {
    {"ir_version", &ModelInfo::ir_version}, {"model_version", &ModelInfo::model_version}};
inline constexpr std::pair<const char*, std::string ModelInfo::*> kTextFields[] = {
    {"producer_name", &ModelInfo::producer_name}, {"producer_version", &ModelInfo::producer_version},
    {"domain", &ModelInfo::domain},               {"doc_string", &ModelInfo::doc_string},
    {"graph_doc_string", &ModelInfo::graph_doc_string}};

}  // namespace isomer::text_detail
