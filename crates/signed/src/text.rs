//! What an identifier held as checked text ([`crate::GpuUuid`], [`crate::PublicKey`]) lets
//! its readers do: read it as a `str`, print it, compare it with text, and give its text
//! back. Making one stays with the type's own checked constructors.

/// Implements reading for a newtype `$T(String)` whose text was checked when it was made:
/// `Display`, `Deref<Target = str>`, `AsRef<str>`, `Borrow<str>` (map lookups by `&str`),
/// equality with `str`, `&str` and `String` both ways, and `From<$T> for String`.
macro_rules! read_as_text {
    ($T:ty) => {
        impl std::fmt::Display for $T {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::ops::Deref for $T {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $T {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl std::borrow::Borrow<str> for $T {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $T {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $T {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $T {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$T> for str {
            fn eq(&self, other: &$T) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$T> for &str {
            fn eq(&self, other: &$T) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$T> for String {
            fn eq(&self, other: &$T) -> bool {
                *self == other.0
            }
        }

        impl From<$T> for String {
            fn from(value: $T) -> String {
                value.0
            }
        }
    };
}

pub(crate) use read_as_text;
