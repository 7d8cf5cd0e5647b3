//! A bounded pool of frame-sized buffers, lent to connections only while they read or
//! write a frame. Buffers are allocated on first use, up to the bound, and then reused, so
//! serving stays allocation-free once warm; a connection that finds every buffer lent waits.

use std::sync::{Arc, Mutex};

use lightwire_noise::MAX_FRAME_LEN;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A buffer on loan, with the permit that counts it against the bound.
pub struct Loan {
    /// The buffer ([`MAX_FRAME_LEN`] bytes).
    pub buf: Box<[u8]>,
    permit: OwnedSemaphorePermit,
}

/// The pool.
pub struct Pool {
    free: Mutex<Vec<Box<[u8]>>>,
    permits: Arc<Semaphore>,
    max: usize,
}

impl Pool {
    /// A pool of at most `max` buffers (none allocated yet).
    pub fn new(max: usize) -> Pool {
        Pool {
            free: Mutex::new(Vec::with_capacity(max)),
            permits: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// The bound.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Buffers lent now.
    pub fn lent(&self) -> usize {
        self.max - self.permits.available_permits()
    }

    /// Borrow a buffer, waiting while all are lent.
    pub async fn take(&self) -> Option<Loan> {
        let permit = self.permits.clone().acquire_owned().await.ok()?;
        let buf = self
            .free
            .lock()
            .ok()
            .and_then(|mut f| f.pop())
            .unwrap_or_else(|| vec![0u8; MAX_FRAME_LEN].into_boxed_slice());
        Some(Loan { buf, permit })
    }

    /// Give a buffer back.
    pub fn give(&self, buf: Box<[u8]>, permit: OwnedSemaphorePermit) {
        if let Ok(mut f) = self.free.lock() {
            f.push(buf);
        }
        drop(permit);
    }
}

impl Loan {
    /// Split into the buffer and its permit (to put the buffer in a reader or writer).
    pub fn into_parts(self) -> (Box<[u8]>, OwnedSemaphorePermit) {
        (self.buf, self.permit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lends_up_to_the_bound_and_reuses() {
        let pool = Arc::new(Pool::new(2));
        let a = pool.take().await.unwrap();
        let b = pool.take().await.unwrap();
        assert_eq!(pool.lent(), 2);
        // A third waits until one comes back.
        let waiter = {
            let pool = pool.clone();
            tokio::spawn(async move { pool.take().await.map(|l| l.buf.as_ptr() as usize) })
        };
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        let a_ptr = a.buf.as_ptr() as usize;
        let (buf, permit) = a.into_parts();
        pool.give(buf, permit);
        assert_eq!(
            waiter.await.unwrap(),
            Some(a_ptr),
            "the same buffer, reused"
        );
        drop(b);
    }
}
