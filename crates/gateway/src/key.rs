//! The gateway's static key on disk: 32 bytes in a file only its owner may read, made on
//! first start. The key is the gateway's identity (every client pins its public key), so a
//! file others can read or write is refused, as ssh refuses such private keys.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use lightwire_noise::{KeyError, SecretKey};

/// Why the key file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum KeyFileError {
    /// Reading or creating it failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        #[source]
        source: std::io::Error,
    },
    /// It does not hold a secp256k1 secret key of 32 bytes.
    #[error("{}: not a 32-byte secret key: {source}", path.display())]
    NotAKey {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KeyError,
    },
    /// Other users may read or write it.
    #[error(
        "{}: the key file is open to other users (mode {mode:o}); make it private with \
         `chmod 600 {}`",
        path.display(),
        path.display()
    )]
    OpenToOthers {
        /// The file.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// No randomness to make a new key with.
    #[error("no randomness: {0}")]
    NoRandomness(String),
}

/// The static key in `path`, created (32 random bytes, mode 0600) if it does not exist.
pub fn load_or_create(path: &Path) -> Result<SecretKey, KeyFileError> {
    let io = |source| KeyFileError::Io {
        path: path.to_owned(),
        source,
    };
    match std::fs::read(path) {
        Ok(bytes) => {
            let key = SecretKey::from_slice(&bytes).map_err(|source| KeyFileError::NotAKey {
                path: path.to_owned(),
                source,
            })?;
            private(path)?;
            Ok(key)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = SecretKey::random().map_err(|e| KeyFileError::NoRandomness(e.to_string()))?;
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
            let mut f = options.open(path).map_err(io)?;
            f.write_all(&key.to_bytes()[..])
                .and_then(|()| f.sync_all())
                .map_err(io)?;
            Ok(key)
        }
        Err(e) => Err(io(e)),
    }
}

/// Refuse a key file that others can read or write.
#[cfg(unix)]
fn private(path: &Path) -> Result<(), KeyFileError> {
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(path)
        .map_err(|source| KeyFileError::Io {
            path: path.to_owned(),
            source,
        })?
        .permissions()
        .mode();
    if mode & 0o077 != 0 {
        return Err(KeyFileError::OpenToOthers {
            path: path.to_owned(),
            mode: mode & 0o777,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn private(_path: &Path) -> Result<(), KeyFileError> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Made once, then the same key; refused when short or open to others.
    #[test]
    fn made_once_then_read_and_refused_when_unsafe() {
        let dir = std::env::temp_dir().join(format!("lightwire-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k");
        let made = load_or_create(&path).unwrap();
        let again = load_or_create(&path).unwrap();
        assert_eq!(made.public_key(), again.public_key());
        std::fs::write(dir.join("short"), [1u8; 31]).unwrap();
        assert!(matches!(
            load_or_create(&dir.join("short")),
            Err(KeyFileError::NotAKey { .. }) | Err(KeyFileError::OpenToOthers { .. })
        ));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            let err = load_or_create(&path).unwrap_err();
            assert!(
                matches!(err, KeyFileError::OpenToOthers { mode: 0o644, .. }),
                "{err}"
            );
            assert!(err.to_string().contains("chmod 600"), "{err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
